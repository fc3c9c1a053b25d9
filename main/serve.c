/* toolcage serve: wires the layers together in order and stops them in reverse
 * (docs/architecture.md). */
#include <getopt.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "execution/request.h"
#include "audit/audit.h"
#include "core/keys.h"
#include "broker/secrets.h"
#include "broker/token.h"
#include "api/api.h"
#include "common/util.h"
#include "console/console.h"
#include "policy/policy.h"
#include "policy/prescreen.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "console/session.h"
#include "server/auth.h"
#include "core/config.h"
#include "core/db.h"
#include "server/http.h"
#include "core/log.h"
#include "core/migrate.h"
#include "server/recorder.h"
#include "server/reload.h"
#include "server/verifier.h"
#include "server/egress_asks.h"
#include "server/events.h"
#include "server/slotq.h"
#include "server/waiters.h"
#include "server/webhook.h"
#include "server/worker.h"
#include <curl/curl.h>
#include "main/cli.h"

/* The runtime role must not be able to rewrite the audit trail: it may not own the audit
 * tables (an owner can disable their triggers and ALTER them), be a member of their owner,
 * or be a superuser. 0 when it cannot; -EPERM (with a message) when it can; -EIO. */
static int check_runtime_role(struct tc_db *db)
{
    PGconn *c = tc_db_acquire(db, TC_DB_WAIT_MS);
    PGresult *r =
        c ? tc_db_exec(
                c,
                "SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
                " coalesce((SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c"
                "  WHERE c.relname IN ('audit_log', 'audit_checkpoints', 'audit_head', "
                "'audit_chain')"
                "  AND c.relnamespace = 'public'::regnamespace"
                "  AND pg_has_role(current_user, c.relowner, 'MEMBER')), '')",
                0, NULL)
          : NULL;
    tc_db_release(db, c);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        tc_log(TC_LOG_ERROR, "cannot check the runtime role's privileges", NULL);
        return -EIO;
    }
    bool super = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    const char *owned = PQgetvalue(r, 0, 2);
    int rc = 0;
    if (super || *owned) {
        fprintf(stderr,
                "toolcage: the runtime role '%s' (TOOLCAGE_DATABASE_URL) %s%s, so it could rewrite "
                "the audit trail. Run with two roles: an owner that migrates "
                "(TOOLCAGE_MIGRATE_DATABASE_URL) and a runtime role that owns nothing (see "
                "docs/audit.md, \"Database roles\").\n",
                PQgetvalue(r, 0, 0),
                super ? "is a superuser" : "owns (or may act as the owner of) ",
                super ? "" : owned);
        rc = -EPERM;
    }
    PQclear(r);
    return rc;
}

/* SIGTERM's grace: no new executions (503 draining), no new claims (queued work stays for
 * the other replicas), running sandboxes get up to `seconds` to finish.
 * A second signal ends the wait at once. */
static void drain(struct tc_server *srv, struct tc_worker *worker, const sigset_t *set,
                  int64_t seconds)
{
    srv->draining = true;
    tc_worker_drain(worker);
    int64_t t0 = tc_now_ms(), deadline = t0 + seconds * 1000;
    unsigned left = tc_launcher_in_flight(srv->launcher);
    tc_log(TC_LOG_INFO, "draining", "{s:i, s:I}", "running", (int)left, "seconds",
           (json_int_t)seconds);
    while ((left = tc_launcher_in_flight(srv->launcher) + tc_recorder_pending(srv->recorder)) > 0 &&
           tc_now_ms() < deadline) {
        struct timespec tick = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            tc_log(TC_LOG_INFO, "drain cut short", "{s:s}", "signal", strsignal(sig));
            break;
        }
    }
    tc_log(TC_LOG_INFO, "drained", "{s:i, s:I}", "left", (int)left, "ms",
           (json_int_t)(tc_now_ms() - t0));
}

int tc_cmd_serve(int argc, char **argv)
{
    if (tc_cli_wants_help(argc, argv))
        return tc_cli_usage_of("serve");
    struct tc_config cfg;
    if (tc_cli_load_config(&cfg) < 0)
        return tc_cli_fail_config();
    /* libcurl (webhooks; OpenSSL's configuration with it) only where it is used, before any
     * thread: the other commands start without it */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "toolcage: libcurl failed to initialise\n");
        tc_config_free(&cfg);
        return 1;
    }
    int rc = 1, r;
    _cleanup_free_ char *err = NULL; /* before the first goto: out frees it */
    struct tc_keys *keys = NULL;
    tc_console_configure(&cfg);
    /* The console first: its prefix is the narrower one. */
    static const struct tc_route_group *const routes[] = {&tc_console_routes, &tc_api_routes, NULL};
    static const struct tc_route_group *const health_routes[] = {&tc_api_health_routes, NULL};
    struct tc_server srv = {.cfg = &cfg, .routes = routes, .health_routes = health_routes};
    if (cfg.public_url)
        snprintf(srv.public_url, sizeof(srv.public_url), "%s", cfg.public_url);
    else
        snprintf(srv.public_url, sizeof(srv.public_url), "http://%s%s%s:%d",
                 strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host,
                 strchr(cfg.listen_host, ':') ? "]" : "", (int)cfg.listen_port);
    if (!cfg.public_url &&
        (strcmp(cfg.listen_host, "0.0.0.0") == 0 || strcmp(cfg.listen_host, "::") == 0))
        tc_log(TC_LOG_WARN,
               "links in reviewer notifications name no reachable host: set "
               "TOOLCAGE_PUBLIC_URL",
               "{s:s}", "public_url", srv.public_url);
    struct tc_worker *worker = NULL;
    struct tc_webhooks *webhooks = NULL;
    pthread_mutex_init(&srv.policy_lock, NULL);
    pthread_rwlock_init(&srv.run_lock, NULL);

    /* Signals are taken synchronously by this thread; every other thread blocks them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    json_t *errors = NULL;
    if (tc_policy_load(cfg.policy_path, &srv.policy, &errors) < 0) {
        fprintf(stderr, "toolcage: TOOLCAGE_POLICY=%s is not a valid policy:\n", cfg.policy_path);
        tc_cli_print_policy_errors(cfg.policy_path, errors);
        json_decref(errors);
        goto out;
    }
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
        goto out;
    }
    srv.keys = keys;
    if (tc_keys_add_previous(keys, cfg.previous_master_key_files, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load a previous master key");
        goto out;
    }
    if (tc_cli_run_migrations(&cfg) < 0)
        goto out;
    if (tc_db_open(cfg.database_url, (unsigned)cfg.db_pool, &srv.db, &err) < 0) {
        tc_log(TC_LOG_ERROR, "cannot connect to the database", "{s:s}", "error", err ? err : "");
        goto out;
    }
    if (check_runtime_role(srv.db) < 0)
        goto out;
    PGconn *kc = tc_db_acquire(srv.db, TC_DB_WAIT_MS);
    r = kc ? tc_audit_publish_key(kc, keys) : -EIO;
    /* A checkpoint at start, signed by the key this server now holds after checking every
     * record since the last one: during a master-key rotation (old key still configured as
     * previous) it vouches for the records made under the old key, which is what lets
     * verification accept them once the old key is gone. */
    int start_cp = r == 0 ? tc_audit_checkpoint(kc, keys, NULL) : 0;
    tc_db_release(srv.db, kc);
    if (r < 0) {
        tc_log(TC_LOG_ERROR, "cannot register the audit checkpoint key", NULL);
        goto out;
    }
    if (start_cp == -EBADMSG)
        tc_log(TC_LOG_ERROR,
               "audit checkpoint refused at start: a record since the last "
               "checkpoint does not verify (GET /v1/audit/verify names it)",
               NULL);
    struct tc_launcher_options lo = tc_cli_launcher_options(&cfg, (unsigned)cfg.max_sandboxes);
    r = tc_launcher_start(&lo, &srv.launcher);
    if (r < 0) {
        /* strerror of the launcher's own cause (e.g. "No space left on device") */
        tc_log(TC_LOG_ERROR, "cannot start the sandbox launcher", "{s:s, s:s}", "error",
               strerror(-r), "state_dir", cfg.state_dir);
        goto out;
    }
    tc_slotq_init(&srv);
    r = tc_recorder_start(&srv, &srv.recorder);
    if (r < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the recorder", "{s:s}", "error", strerror(-r));
        goto out;
    }
    free(err);
    err = NULL;
    if (tc_worker_start(&srv, &worker, &err) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the worker", "{s:s}", "error", err ? err : "");
        goto out;
    }
    if ((r = tc_verifier_start(&srv, &srv.verifier)) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the audit verifier", "{s:s}", "error", strerror(-r));
        goto out;
    }
    struct tc_webhooks_options wo = {.database_url = cfg.database_url,
                                     .keys = keys,
                                     .allow_private = cfg.webhook_allow_private,
                                     .instance_id = srv.instance_id,
                                     .max_in_flight = (unsigned)cfg.webhook_concurrency,
                                     .per_tenant = (unsigned)cfg.webhook_tenant_concurrency,
                                     .max_attempts = (unsigned)cfg.webhook_max_attempts,
                                     .smtp_url = cfg.smtp_url,
                                     .smtp_from = cfg.smtp_from};
    free(err);
    err = NULL;
    if (tc_webhooks_start(&wo, &webhooks, &err) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the webhook deliveries", "{s:s}", "error",
               err ? err : "");
        goto out;
    }
    json_t *host = tc_launcher_host_info(srv.launcher);
    tc_log(TC_LOG_INFO, "sandbox host support", "{s:O}", "host", host ? host : json_null());
    json_decref(host);
    free(err);
    err = NULL;
    if (tc_events_start(cfg.sse_heartbeat_seconds * 1000) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the event streams' thread", NULL);
        goto out;
    }
    if (tc_stream_share_start(&srv) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the shared output's writer", NULL);
        goto out;
    }
    if (tc_api_sessions_start(&srv) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the sessions' keeper", NULL);
        goto out;
    }
    if (tc_egress_asks_start(&srv) < 0) {
        tc_log(TC_LOG_ERROR, "cannot start the egress asks' thread", NULL);
        goto out;
    }
    if (tc_http_start(&srv, &err) < 0) {
        tc_log(TC_LOG_ERROR, "cannot listen", "{s:s, s:s, s:i}", "error", err ? err : "", "host",
               cfg.listen_host, "port", (int)cfg.listen_port);
        goto out;
    }
    tc_log(TC_LOG_INFO, "serving", "{s:s, s:i, s:s, s:i}", "host", cfg.listen_host, "port",
           (int)cfg.listen_port, "policy", cfg.policy_path, "tools",
           (int)tc_policy_ntools(srv.policy));

    for (;;) {
        /* Wake at least once a minute to sign an audit checkpoint if the chain moved. */
        struct timespec minute = {.tv_sec = 60};
        int sig = sigtimedwait(&set, NULL, &minute);
        if (sig < 0) {
            if (errno == EAGAIN) {
                PGconn *cc = tc_db_acquire(srv.db, 1000);
                int cr = cc ? tc_audit_checkpoint(cc, keys, NULL) : -EIO;
                if (cr == -EBADMSG)
                    tc_log(TC_LOG_ERROR,
                           "audit checkpoint refused: a record since the last "
                           "checkpoint does not verify (GET /v1/audit/verify "
                           "names it)",
                           NULL);
                else if (cr < 0)
                    tc_log(TC_LOG_WARN, "audit checkpoint failed", NULL);
                tc_db_release(srv.db, cc);
            }
            continue;
        }
        if (sig == SIGHUP) {
            json_t *actor = json_pack("{s:s, s:s}", "type", "system", "id", "SIGHUP");
            json_t *errs = NULL, *info = NULL;
            int rr = tc_server_reload_policy(&srv, actor, &errs, &info);
            if (rr == 0)
                tc_log(TC_LOG_INFO, "policy reloaded", "{s:s, s:O}", "policy", cfg.policy_path,
                       "result", info);
            else
                tc_log(TC_LOG_ERROR, "policy reload refused; the old policy stays", "{s:s, s:O}",
                       "policy", cfg.policy_path, "errors", errs ? errs : json_null());
            json_decref(actor);
            json_decref(errs);
            json_decref(info);
            continue;
        }
        tc_log(TC_LOG_INFO, "shutting down", "{s:s}", "signal", strsignal(sig));
        break;
    }
    /* Stop accepting; let running sandboxes finish (a bounded drain); then end the rest
     * (their suspended requests resume with an error) and stop the HTTP threads. */
    if (srv.mhd)
        MHD_quiesce_daemon(srv.mhd);
    tc_api_sessions_stop(); /* sessions end now (server_shutdown): they would outlast a drain */
    drain(&srv, worker, &set, cfg.drain_seconds);
    /* From here no request suspends and nothing touches the launcher; sections already in
     * progress finish first (they hold the run lock). */
    tc_server_set_stopping(&srv);
    tc_worker_quiesce(worker);
    tc_slotq_detach();
    tc_egress_asks_stop(); /* asks still pending expire (the proxy denies them with its sandbox) */
    tc_launcher_stop(srv.launcher); /* pending executions resume with an error result */
    srv.launcher = NULL;
    tc_worker_stop(worker);
    worker = NULL;
    /* Every outcome stored, or kept on disk for the next start; every waiting client answered. */
    tc_recorder_stop(srv.recorder);
    srv.recorder = NULL;
    tc_webhooks_stop(webhooks); /* deliveries in flight are aborted, due again at once */
    webhooks = NULL;
    tc_waiters_wake_all();
    tc_slotq_close();       /* calls waiting for a slot answer 503 (draining) */
    tc_stream_share_stop(); /* shared output removed (the sweep removes what it could not) */
    tc_events_stop();       /* every event stream ends after what it holds (the outcomes are in) */
    tc_verifier_stop(srv.verifier); /* its waiting requests resume */
    /* MHD must not be stopped while a connection is suspended: wait until every resumed
     * request has been answered (bounded), then a little for the answers to be written:
     * for requests in progress, not for connections a client keeps open between requests
     * (every stop waited out its 1 s bound for an idle keep-alive connection). */
    for (int i = 0; i < 200 && srv.suspended > 0; i++)
        usleep(25 * 1000);
    for (int i = 0; i < 200 && srv.requests > 0; i++)
        usleep(5 * 1000);
    tc_http_stop(&srv);
    rc = 0;
out:
    tc_api_sessions_stop();
    tc_worker_quiesce(worker);
    tc_stream_share_stop();
    tc_events_stop();
    tc_http_stop(&srv);
    tc_slotq_detach();
    tc_egress_asks_stop();
    tc_launcher_stop(srv.launcher);
    tc_worker_stop(worker);
    tc_verifier_free(srv.verifier);
    tc_recorder_stop(srv.recorder);
    tc_webhooks_stop(webhooks);
    tc_db_close(srv.db);
    tc_keys_free((struct tc_keys *)srv.keys);
    tc_policy_unref(srv.policy);
    pthread_mutex_destroy(&srv.policy_lock);
    pthread_rwlock_destroy(&srv.run_lock);
    tc_config_free(&cfg);
    curl_global_cleanup();
    return rc;
}
