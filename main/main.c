/* toolcage: command-line entry point. Each subcommand is a function; `serve` wires the
 * HTTP server, database pool and launcher together. */
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
#include "server/waiters.h"
#include "server/webhook.h"
#include "server/worker.h"
#include <curl/curl.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *help;
};

static int usage_of(const char *name);

static int fail_config(void)
{
    return 2;
}

static int load_config(struct tc_config *cfg)
{
    _cleanup_free_ char *err = NULL;
    if (tc_config_load(cfg, &err) < 0) {
        fprintf(stderr, "toolcage: invalid configuration: %s\n", err ? err : "out of memory");
        return -1;
    }
    tc_log_set_level((enum tc_log_level)cfg->log_level);
    return 0;
}

/* What the launcher takes from the configuration (it reads no environment itself). */
static struct tc_launcher_options launcher_options(const struct tc_config *cfg, unsigned max)
{
    return (struct tc_launcher_options){
        .state_dir = cfg->state_dir,
        .max_sandboxes = max,
        .pool = cfg->pool ? (int)cfg->pool : TC_POOL_NONE,
        .uid_registry = cfg->uid_registry,
        .gvisor_platform = cfg->gvisor_platform,
        .init_path = cfg->init_path,
        .no_cgroup = cfg->no_cgroup,
        .no_seccomp_notify = cfg->no_seccomp_notify,
    };
}

static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static void print_policy_errors(const char *path, json_t *errors)
{
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e) fprintf(stderr, "%s: %s\n", path, json_string_value(e));
}

/* The runtime role's name, from the runtime conninfo, so migrations can grant to it. */
static char *app_role_of(const char *conninfo)
{
    char *role = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, "user") == 0 && o->val)
            role = strdup(o->val);
    PQconninfoFree(opts);
    return role;
}

static int run_migrations(const struct tc_config *cfg)
{
    _cleanup_free_ char *err = NULL;
    PGconn *c = tc_db_connect(cfg->migrate_database_url, &err);
    if (!c) {
        tc_log(TC_LOG_ERROR, "cannot connect for migrations", "{s:s}", "error", err ? err : "");
        return -1;
    }
    _cleanup_free_ char *role = app_role_of(cfg->database_url);
    int n = tc_migrate(c, role, &err);
    PQfinish(c);
    if (n < 0) {
        tc_log(TC_LOG_ERROR, "migration failed", "{s:s}", "error", err ? err : "");
        return -1;
    }
    tc_log(TC_LOG_INFO, "migrations applied", "{s:i}", "applied", n);
    return n;
}

/* ---- serve ---- */

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

static int cmd_serve(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage_of("serve");
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int rc = 1, r;
    _cleanup_free_ char *err = NULL; /* before the first goto: out frees it */
    struct tc_keys *keys = NULL;
    tc_console_configure(&cfg);
    /* The console first: its prefix is the narrower one. */
    static const struct tc_route_group *const routes[] = {&tc_console_routes, &tc_api_routes, NULL};
    struct tc_server srv = {.cfg = &cfg, .routes = routes};
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
        print_policy_errors(cfg.policy_path, errors);
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
    if (run_migrations(&cfg) < 0)
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
    struct tc_launcher_options lo = launcher_options(&cfg, (unsigned)cfg.max_sandboxes);
    r = tc_launcher_start(&lo, &srv.launcher);
    if (r < 0) {
        /* strerror of the launcher's own cause (e.g. "No space left on device") */
        tc_log(TC_LOG_ERROR, "cannot start the sandbox launcher", "{s:s, s:s}", "error",
               strerror(-r), "state_dir", cfg.state_dir);
        goto out;
    }
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
                                     .max_attempts = (unsigned)cfg.webhook_max_attempts};
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
    /* Stop accepting, end the sandboxes (their suspended requests resume with an error),
     * then stop the HTTP threads. */
    if (srv.mhd)
        MHD_quiesce_daemon(srv.mhd);
    /* From here no request suspends and nothing touches the launcher; sections already in
     * progress finish first (they hold the run lock). */
    tc_server_set_stopping(&srv);
    tc_worker_quiesce(worker);
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
    tc_verifier_stop(srv.verifier); /* its waiting requests resume */
    /* MHD must not be stopped while a connection is suspended: wait until every resumed
     * request has been answered (bounded), then a little for the answers to be written. */
    for (int i = 0; i < 200 && srv.suspended > 0; i++)
        usleep(25 * 1000);
    for (int i = 0;
         i < 20 &&
         MHD_get_daemon_info(srv.mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS)->num_connections > 0;
         i++)
        usleep(50 * 1000);
    tc_http_stop(&srv);
    rc = 0;
out:
    tc_worker_quiesce(worker);
    tc_http_stop(&srv);
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
    return rc;
}

/* ---- migrate ---- */

static int cmd_migrate(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage_of("migrate");
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int n = run_migrations(&cfg);
    tc_config_free(&cfg);
    if (n < 0)
        return 1;
    printf("%d migration(s) applied\n", n);
    return 0;
}

/* ---- keys ---- */

static int cmd_webhook_secret(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[2], "--tenant") != 0)
        return usage_of("keys");
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int rc = 1;
    struct tc_keys *keys = NULL;
    _cleanup_free_ char *err = NULL;
    PGconn *conn = NULL;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else {
        const char *p[] = {argv[3]};
        PGresult *r = tc_db_exec(conn, "SELECT id FROM tenants WHERE name = $1", 1, p);
        if (r && PQntuples(r) == 1) {
            char secret[65];
            tc_webhook_secret(keys, PQgetvalue(r, 0, 0), secret);
            printf("%s\n", secret);
            sodium_memzero(secret, sizeof(secret));
            rc = 0;
        } else {
            fprintf(stderr, "toolcage: no tenant named '%s'\n", argv[3]);
        }
        PQclear(r);
    }
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

static int cmd_keys(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "webhook-secret") == 0 && !wants_help(argc, argv))
        return cmd_webhook_secret(argc, argv);
    if (wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "create") != 0)
        return usage_of("keys");
    const char *tenant = NULL, *role = NULL, *person = NULL;
    static const struct option lopts[] = {{"tenant", required_argument, NULL, 't'},
                                          {"role", required_argument, NULL, 'r'},
                                          {"person", required_argument, NULL, 'p'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 't')
            tenant = optarg;
        else if (c == 'r')
            role = optarg;
        else if (c == 'p')
            person = optarg;
        else
            return usage_of("keys") ? 2 : 2;
    }
    bool operator= role && strcmp(role, "operator") == 0;
    if (!role || (!tenant && !operator) || ((tenant || person) && operator) || optind != argc) {
        fprintf(stderr, "toolcage keys create: --tenant and --role are required (--role operator"
                        " takes neither --tenant nor --person)\n");
        return 2;
    }
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    _cleanup_free_ char *err = NULL;
    _cleanup_free_ char *key = NULL;
    struct tc_keys *keys = NULL; /* the audit record may be a signed checkpoint's */
    PGconn *conn = NULL;
    int rc = 1;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else if (tc_auth_create_key(conn, keys, tenant, role, person, &key, &err) < 0) {
        fprintf(stderr, "toolcage: cannot create the key: %s\n", err ? err : "");
    } else {
        if (operator)
            printf("created an operator key (every tenant's audit trail, policy reload); it is"
                   " shown once:\n%s\n",
                   key);
        else
            printf("created a %s key for tenant %s%s%s; it is shown once:\n%s\n", role, tenant,
                   person ? ", person " : "", person ? person : "", key);
        rc = 0;
    }
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

/* ---- policy ---- */

static int cmd_policy(int argc, char **argv)
{
    if (wants_help(argc, argv) || argc != 3 || strcmp(argv[1], "check") != 0)
        return usage_of("policy");
    struct tc_policy *p = NULL;
    json_t *errors = NULL;
    if (tc_policy_load(argv[2], &p, &errors) < 0) {
        if (json_array_size(errors) == 0)
            fprintf(stderr, "%s: cannot be read\n", argv[2]);
        print_policy_errors(argv[2], errors);
        json_decref(errors);
        return 1;
    }
    printf("ok: %zu tools\n", tc_policy_ntools(p));
    tc_policy_unref(p);
    return 0;
}

/* ---- exec ---- */

static int exit_status_of(json_t *view)
{
    const char *status = json_string_value(json_object_get(view, "status"));
    json_t *code = json_object_get(view, "exit_code");
    if (status && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0) &&
        json_is_integer(code))
        return (int)json_integer_value(code);
    if (status && strcmp(status, "timeout") == 0)
        return 124;
    if (status && strcmp(status, "killed") == 0)
        return 137;
    return 125;
}

static int cmd_exec(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage_of("exec");
    const char *tool_name = NULL, *policy_path = NULL;
    bool as_json = false;
    static const struct option lopts[] = {{"tool", required_argument, NULL, 't'},
                                          {"policy", required_argument, NULL, 'p'},
                                          {"json", no_argument, NULL, 'j'},
                                          {NULL, 0, NULL, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 't')
            tool_name = optarg;
        else if (c == 'p')
            policy_path = optarg;
        else if (c == 'j')
            as_json = true;
        else
            return 2;
    }
    if (!tool_name || optind != argc) {
        fprintf(stderr, "toolcage exec: --tool NAME is required; the code is read from stdin\n");
        return 2;
    }
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int rc = 125;
    struct tc_policy *policy = NULL;
    struct tc_launcher *launcher = NULL;
    json_t *errors = NULL, *body = NULL, *spec = NULL, *result = NULL, *view = NULL;
    struct tc_exec_request req = {0};
    _cleanup_free_ char *code = NULL;
    size_t code_len = 0;
    if (!policy_path)
        policy_path = cfg.policy_path;

    if (tc_policy_load(policy_path, &policy, &errors) < 0) {
        print_policy_errors(policy_path, errors);
        goto out;
    }
    int r = tc_read_all(STDIN_FILENO, TC_EXEC_MAX_CODE_BYTES, &code, &code_len);
    if (r < 0) {
        fprintf(stderr, "toolcage exec: cannot read the code from stdin: %s\n", strerror(-r));
        goto out;
    }
    body = json_pack("{s:s, s:s%}", "tool", tool_name, "code", code, code_len);
    if (!body || tc_exec_request_parse(body, &req, &errors) < 0) {
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e) fprintf(stderr, "toolcage exec: %s: %s\n",
                                                 json_string_value(json_object_get(e, "path")),
                                                 json_string_value(json_object_get(e, "message")));
        goto out;
    }
    const struct tc_tool *tool = tc_policy_tool(policy, tool_name);
    if (!tool) {
        fprintf(stderr, "toolcage exec: no tool named '%s' in %s\n", tool_name, policy_path);
        goto out;
    }
    int64_t limits[TC_LIMIT__COUNT];
    if (tc_exec_limits(tool, &req, limits, &errors) < 0)
        goto out;
    char id[37], created[32], finished[32];
    tc_uuid7(id);
    tc_iso8601(tc_wall_ms(), created);
    spec = tc_exec_build_spec(tool, &req, limits, id);
    struct tc_launcher_options lo = launcher_options(&cfg, 1);
    if (!spec || (r = tc_launcher_start(&lo, &launcher)) < 0) {
        fprintf(stderr, "toolcage exec: cannot start the launcher: %s\n", strerror(-r));
        goto out;
    }
    if ((r = tc_launcher_run_sync(launcher, spec, &result)) < 0) {
        fprintf(stderr, "toolcage exec: the sandbox did not run: %s\n", strerror(-r));
        goto out;
    }
    tc_iso8601(tc_wall_ms(), finished);
    struct tc_redactor *red = NULL;
    json_t *findings = NULL;
    if (tc_prescreen_request(tool, req.body, &findings) < 0)
        findings = json_array();
    if ((r = tc_exec_redactor(tool, cfg.state_dir, &red)) < 0) {
        fprintf(stderr, "toolcage exec: cannot build the redactor: %s\n", strerror(-r));
        json_decref(findings);
        goto out;
    }
    struct tc_exec_filter filter = {.redactor = red};
    view = tc_exec_view(id, tool->name, result, limits, created, finished, &filter, findings);
    tc_redactor_free(red);
    json_decref(findings);
    if (as_json) {
        json_dumpf(view, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else {
        fputs(json_string_value(json_object_get(view, "stdout")), stdout);
        fputs(json_string_value(json_object_get(view, "stderr")), stderr);
        const char *status = json_string_value(json_object_get(view, "status"));
        if (strcmp(status, "completed") && strcmp(status, "failed"))
            fprintf(stderr, "toolcage exec: %s%s%s\n", status,
                    json_is_string(json_object_get(view, "killed_reason")) ? ": " : "",
                    json_is_string(json_object_get(view, "killed_reason"))
                        ? json_string_value(json_object_get(view, "killed_reason"))
                        : "");
    }
    rc = exit_status_of(view);
out:
    tc_launcher_stop(launcher);
    tc_exec_request_done(&req);
    json_decref(errors);
    json_decref(body);
    json_decref(spec);
    json_decref(result);
    json_decref(view);
    tc_policy_unref(policy);
    tc_config_free(&cfg);
    return rc;
}

/* ---- audit ---- */

static int cmd_audit(int argc, char **argv)
{
    if (wants_help(argc, argv) || argc < 2 ||
        (strcmp(argv[1], "verify") != 0 && strcmp(argv[1], "public-key") != 0))
        return usage_of("audit");
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int rc = 1;
    if (strcmp(argv[1], "public-key") == 0) {
        struct tc_keys *keys = NULL;
        _cleanup_free_ char *err = NULL;
        if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
            fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
        } else {
            char hex[65];
            sodium_bin2hex(hex, sizeof(hex), keys->audit_sign_pk, 32);
            printf("key_id %s\n%s\n", keys->audit_key_id, hex);
            rc = 0;
        }
        tc_keys_free(keys);
        tc_config_free(&cfg);
        return rc;
    }
    const char *file = NULL, *pk_hex = NULL;
    static const struct option lopts[] = {{"file", required_argument, NULL, 'f'},
                                          {"public-key", required_argument, NULL, 'k'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'f')
            file = optarg;
        else if (c == 'k')
            pk_hex = optarg;
        else
            goto out;
    }
    struct tc_audit_verdict v;
    if (file) {
        unsigned char pk[32];
        size_t pklen = 0;
        if (pk_hex &&
            (sodium_hex2bin(pk, sizeof(pk), pk_hex, strlen(pk_hex), NULL, &pklen, NULL) != 0 ||
             pklen != 32)) {
            fprintf(stderr, "toolcage audit verify: --public-key must be 64 hex digits\n");
            goto out;
        }
        FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
        if (!f) {
            fprintf(stderr, "toolcage audit verify: %s: %s\n", file, strerror(errno));
            goto out;
        }
        int r = tc_audit_verify_file(f, pk_hex ? pk : NULL, &v);
        if (f != stdin)
            fclose(f);
        if (r < 0) {
            fprintf(stderr, "toolcage audit verify: %s is not an audit export\n", file);
            goto out;
        }
    } else {
        /* The database mode checks every record's authentication code: it needs the master
         * key (and the previous ones during a rotation). */
        _cleanup_free_ char *err = NULL;
        struct tc_keys *keys = NULL;
        if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0 ||
            tc_keys_add_previous(keys, cfg.previous_master_key_files, &err) < 0) {
            fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
            tc_keys_free(keys);
            goto out;
        }
        PGconn *conn = tc_db_connect(cfg.database_url, &err);
        if (!conn) {
            fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
            tc_keys_free(keys);
            goto out;
        }
        int r = tc_audit_verify_db(conn, keys, &v);
        PQfinish(conn);
        tc_keys_free(keys);
        if (r < 0) {
            fprintf(stderr, "toolcage audit verify: the audit trail cannot be read\n");
            goto out;
        }
    }
    json_t *o = tc_audit_verdict_json(&v);
    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(o);
    rc = v.ok ? 0 : 3;
out:
    tc_config_free(&cfg);
    return rc;
}

/* ---- users (web console) ---- */

static int cmd_users(int argc, char **argv)
{
    if (wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "add") != 0)
        return usage_of("users");
    const char *name = NULL, *role = NULL, *tenant = "demo", *person = NULL;
    static const struct option lopts[] = {{"name", required_argument, NULL, 'n'},
                                          {"role", required_argument, NULL, 'r'},
                                          {"tenant", required_argument, NULL, 't'},
                                          {"person", required_argument, NULL, 'p'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c == 'n')
            name = optarg;
        else if (c == 'r')
            role = optarg;
        else if (c == 't')
            tenant = optarg;
        else if (c == 'p')
            person = optarg;
        else
            return 2;
    }
    if (!name || !role || optind != argc) {
        fprintf(stderr, "toolcage users add: --name and --role are required; the password is"
                        " read from stdin\n");
        return 2;
    }
    _cleanup_free_ char *pw = NULL;
    size_t len = 0;
    int r = tc_read_all(STDIN_FILENO, TC_CONSOLE_PASSWORD_MAX + 2, &pw, &len);
    if (r < 0) {
        fprintf(stderr, "toolcage users add: cannot read the password from stdin: %s\n",
                strerror(-r));
        return 2;
    }
    if (len > 0 && pw[len - 1] == '\n') /* one trailing newline, as `echo` or a terminal adds */
        pw[--len] = '\0';
    if (len > 0 && pw[len - 1] == '\r')
        pw[--len] = '\0';
    if (strlen(pw) != len) {
        sodium_memzero(pw, len);
        fprintf(stderr, "toolcage users add: the password contains a NUL byte\n");
        return 2;
    }
    struct tc_config cfg;
    if (load_config(&cfg) < 0) {
        sodium_memzero(pw, len);
        return fail_config();
    }
    _cleanup_free_ char *err = NULL;
    struct tc_keys *keys = NULL;
    PGconn *conn = NULL;
    int rc = 1;
    if (tc_keys_load(cfg.master_key_file, &keys, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else if ((r = tc_console_user_add(conn, keys, tenant, name, role, person, pw, &err)) < 0) {
        fprintf(stderr, "toolcage users add: %s\n", err ? err : "failed");
        rc = r == -EEXIST || r == -EINVAL ? 2 : 1;
    } else {
        printf("created console user %s (%s) in tenant %s\n", name, role, tenant);
        rc = 0;
    }
    sodium_memzero(pw, len);
    PQfinish(conn);
    tc_keys_free(keys);
    tc_config_free(&cfg);
    return rc;
}

/* ---- secrets ---- */

/* rotate-master: re-seal every secret under the new master key (or, without --new-key-file,
 * under the current one), row by row, so servers holding both keys keep serving throughout.
 * See docs/credentials.md for the procedure. */
static int cmd_secrets(int argc, char **argv)
{
    if (wants_help(argc, argv) || argc < 2 || strcmp(argv[1], "rotate-master") != 0)
        return usage_of("secrets");
    const char *new_file = NULL;
    static const struct option lopts[] = {{"new-key-file", required_argument, NULL, 'n'},
                                          {NULL, 0, NULL, 0}};
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (c != 'n')
            return 2;
        new_file = optarg;
    }
    if (optind != argc)
        return usage_of("secrets") ? 2 : 2;
    struct tc_config cfg;
    if (load_config(&cfg) < 0)
        return fail_config();
    int rc = 1;
    struct tc_keys *cur = NULL, *to = NULL;
    _cleanup_free_ char *err = NULL;
    PGconn *conn = NULL;
    size_t done = 0, left = 0;
    if (tc_keys_load(cfg.master_key_file, &cur, &err) < 0 ||
        tc_keys_add_previous(cur, cfg.previous_master_key_files, &err) < 0) {
        fprintf(stderr, "toolcage: %s\n", err ? err : "cannot load the master keys");
    } else if (new_file && tc_keys_load(new_file, &to, &err) < 0) {
        fprintf(stderr, "toolcage secrets rotate-master: %s\n", err ? err : "cannot load the key");
    } else if (!(conn = tc_db_connect(cfg.database_url, &err))) {
        fprintf(stderr, "toolcage: cannot connect to the database: %s", err ? err : "\n");
    } else {
        const struct tc_keys *target = to ? to : cur;
        /* Publish both token keys, so tokens signed under either keep verifying. */
        if (tc_audit_publish_key(conn, target) < 0 || tc_token_publish_key(conn, cur) < 0 ||
            tc_token_publish_key(conn, target) < 0 ||
            tc_secrets_reseal_all(conn, cur, target, &done, &left) < 0) {
            fprintf(stderr, "toolcage secrets rotate-master: database error: %s",
                    PQerrorMessage(conn));
        } else {
            printf("re-sealed %zu secret(s) under master key %s; %zu could not be opened\n", done,
                   target->master_id, left);
            /* Holding the current and the previous keys, vouch for the audit records made
             * under either with a checkpoint (see docs/audit.md, trust model). */
            if (!to && tc_audit_checkpoint(conn, cur, NULL) < 0)
                fprintf(stderr, "toolcage secrets rotate-master: no audit checkpoint could be"
                                " signed (GET /v1/audit/verify says why)\n");
            rc = left ? 3 : 0;
        }
    }
    PQfinish(conn);
    tc_keys_free(cur);
    tc_keys_free(to);
    tc_config_free(&cfg);
    return rc;
}

static int cmd_version(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage_of("version");
    printf("toolcage %s\n", TOOLCAGE_VERSION);
    return 0;
}

static const struct command commands[] = {
    {"serve", cmd_serve, "serve", "run the HTTP service (migrates the database first)"},
    {"migrate", cmd_migrate, "migrate", "apply the database migrations (idempotent)"},
    {"keys", cmd_keys,
     "keys create --tenant NAME --role agent|reviewer|auditor|admin [--person NAME]"
     " | keys create --role operator | keys webhook-secret --tenant NAME",
     "create an API key (printed alone on the last line; --person binds it to a person of the"
     " tenant, who counts once among approvers); an operator key (no tenant) reads every"
     " tenant's audit trail and reloads the policy; print a tenant's webhook secret"},
    {"policy", cmd_policy, "policy check FILE", "validate a policy file and print every error"},
    {"exec", cmd_exec, "exec --tool NAME [--policy FILE] [--json]",
     "run code from stdin in the tool's sandbox, without server or database"},
    {"audit", cmd_audit, "audit verify [--file EXPORT [--public-key HEX]] | audit public-key",
     "verify the audit chain (the database, with the master key; or an export file, with the"
     " checkpoint public key); print the checkpoint key"},
    {"users", cmd_users,
     "users add --name NAME --role reviewer|auditor|admin [--tenant NAME] [--person NAME]",
     "create a web console user (tenant default: demo; person default: NAME, the same person"
     " as keys made with --person NAME); the password is read from stdin"},
    {"secrets", cmd_secrets, "secrets rotate-master [--new-key-file FILE]",
     "re-seal every secret under FILE's master key (default: the current one)"},
    {"version", cmd_version, "version", "print the version"},
};

static int usage_of(const char *name)
{
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++)
        if (strcmp(commands[i].name, name) == 0) {
            printf("usage: toolcage %s\n\n%s\n\n", commands[i].usage, commands[i].help);
            tc_config_print_help(stdout);
            return 0;
        }
    return 2;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: toolcage COMMAND [ARGS]\n\ncommands:\n");
    /* usage lines are long (alternatives joined by " | "): each on its own lines, then the
     * help indented, as the environment table below */
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++) {
        const char *u = commands[i].usage;
        fprintf(f, "  ");
        for (const char *bar; (bar = strstr(u, " | ")); u = bar + 3)
            fprintf(f, "%.*s\n  ", (int)(bar - u), u);
        fprintf(f, "%s\n      %s\n", u, commands[i].help);
    }
    fprintf(f, "\n`toolcage COMMAND --help` for one command.\n\n");
    tc_config_print_help(f);
}

int main(int argc, char **argv)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "toolcage: libcurl failed to initialise\n");
        return 1;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "toolcage: libsodium failed to initialise\n");
        return 1;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "launcher") == 0)
        return tc_launcher_main(argc - 1, argv + 1);
    for (size_t i = 0; i < TC_ARRAY_SIZE(commands); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "toolcage: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
