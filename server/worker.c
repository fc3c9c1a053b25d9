#include "server/worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sodium.h>
#include <unistd.h>

#include "api/exec.h"
#include "approval/approval.h"
#include "broker/leases.h"
#include "common/util.h"
#include "policy/policy.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "server/db.h"
#include "server/finish.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/waiters.h"

#define INSTANCE_LOCK_CLASS "7715"

struct job {
    struct tc_worker *w;
    char id[37], tenant_id[37], key_id[37], tool[65], request_id[65], created_at[32];
    int64_t limits[TC_LIMIT__COUNT];
    json_t *result;   /* set by the launcher callback */
    json_t *findings; /* the pre-screen's, from the approval */
    struct tc_grant *grant; /* credentials leased to this run (broker/leases.h) */
    struct job *next;
};

struct tc_worker {
    struct tc_server *srv;
    pthread_t thread;
    bool started;
    int wake_fd; /* eventfd: stop requested or a job finished */
    pthread_mutex_t lock;
    struct job *done; /* finished jobs for the worker thread to record */
    _Atomic bool stopping; /* read by the worker thread without the lock */
    unsigned running;
    PGconn *lock_conn, *listen_conn, *conn;
    int instance_id;
    char instance_str[16];
};

int tc_worker_instance_id(const struct tc_worker *w) { return w ? w->instance_id : 0; }

static void wake(struct tc_worker *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wake_fd, &one, sizeof(one));
    (void)n;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    json_decref(j->result);
    json_decref(j->findings);
    tc_grant_free(j->grant);
    free(j);
}

static void on_job_result(void *userdata, json_t *result)
{
    struct job *j = userdata;
    j->result = json_incref(result);
    pthread_mutex_lock(&j->w->lock);
    j->next = j->w->done;
    j->w->done = j;
    pthread_mutex_unlock(&j->w->lock);
    wake(j->w);
}

static json_t *actor_key(const char *key_id)
{
    return json_pack("{s:s, s:s}", "type", "api_key", "id", key_id);
}

static void record(struct tc_worker *w, struct job *j, json_t *result, const char *action)
{
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    /* The tool's redaction rules as the policy says now; all rules if the tool is gone. */
    struct tc_policy *policy = tc_server_policy(w->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, j->tool);
    struct tc_redactor *red = NULL;
    int rrc = tool ? tc_exec_redactor(tool, w->srv->cfg->state_dir, &red)
                   : tc_redactor_new(NULL, 0, (const char *const[]){w->srv->cfg->state_dir}, 1, &red);
    tc_policy_unref(policy);
    struct tc_exec_filter filter = {.redactor = red};
    filter.secrets = tc_grant_values(j->grant, &filter.nsecrets);
    json_t *view = rrc < 0 ? NULL
                           : tc_exec_view(j->id, j->tool, result, j->limits, j->created_at,
                                          finished, &filter, j->findings);
    tc_redactor_free(red);
    if (view && !tc_grant_empty(j->grant))
        json_object_set_new(view, "credentials", tc_grant_summary(j->grant));
    /* Ended (or interrupted, or refused): its leases and tokens end with it. */
    if (tc_broker_release(w->conn, w->srv->keys, j->id) < 0)
        tc_log(TC_LOG_ERROR, "revoking an execution's credentials failed", "{s:s}",
               "execution_id", j->id);
    json_t *actor = actor_key(j->key_id);
    if (!view || tc_execution_finish(w->conn, w->srv->keys, j->tenant_id, actor, j->tool, j->id,
                                     j->request_id, view, action) < 0) {
        tc_metrics_audit_failure();
        tc_log(TC_LOG_ERROR, "recording an approved execution failed", "{s:s, s:s}",
               "execution_id", j->id, "error", PQerrorMessage(w->conn));
    } else {
        tc_metrics_execution(j->tool, json_string_value(json_object_get(view, "status")),
                             json_integer_value(json_object_get(view, "duration_ms")));
    }
    tc_waiters_wake(j->id);
    json_decref(actor);
    json_decref(view);
}

static void refuse(struct tc_worker *w, struct job *j, const char *why)
{
    json_t *res = json_pack("{s:s, s:s}", "status", "error", "error", why);
    tc_log(TC_LOG_ERROR, "approved execution refused", "{s:s, s:s}", "execution_id", j->id,
           "reason", why);
    record(w, j, res, "execution.refused");
    json_decref(res);
}

/* Start one claimed execution: only the stored, approved payload runs. */
static void start_job(struct tc_worker *w, struct job *j)
{
    const char *p[] = {j->id};
    PGresult *r = tc_db_exec(w->conn, "SELECT payload::text, payload_hash, findings::text"
                                      " FROM approvals WHERE execution_id = $1"
                                      " AND status = 'approved'", 1, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        refuse(w, j, "no approved approval for this execution");
        job_free(j);
        return;
    }
    json_t *payload = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    j->findings = json_loads(PQgetvalue(r, 0, 2), 0, NULL);
    unsigned char want[32], got[32];
    bool hash_ok = payload && tc_db_bytea_parse(PQgetvalue(r, 0, 1), want, sizeof(want));
    PQclear(r);
    if (hash_ok) {
        tc_approval_payload_hash(payload, got);
        hash_ok = sodium_memcmp(want, got, 32) == 0;
    }
    struct tc_policy *policy = tc_server_policy(w->srv);
    const struct tc_tool *tool = NULL;
    json_t *body = NULL, *errors = NULL, *spec = NULL;
    struct tc_exec_request req = {0};
    const char *why = NULL;
    if (!hash_ok) {
        why = "the stored payload does not match the approved hash";
    } else if (!(tool = tc_policy_tool(policy, j->tool))) {
        why = "the tool is no longer declared in the policy";
    } else {
        json_t *creds = json_object_get(tool->raw, "credentials");
        json_t *now_creds = creds ? json_incref(creds) : json_array();
        const char *approved = json_string_value(json_object_get(payload, "tool_policy"));
        char digest[65];
        tc_approval_tool_digest(tool, digest);
        if (!json_equal(now_creds, json_object_get(payload, "credentials")))
            why = "the tool's credentials changed since approval";
        else if (approved && strcmp(approved, digest) != 0)
            why = "the tool's policy changed since approval";
        json_decref(now_creds);
    }
    if (!why) {
        body = json_pack("{s:O, s:O, s:O}", "tool", json_object_get(payload, "tool"), "code",
                         json_object_get(payload, "code"), "files",
                         json_object_get(payload, "files"));
        json_t *in = json_object_get(payload, "stdin");
        if (body && json_is_string(in))
            json_object_set(body, "stdin", in);
        json_t *collect = json_object_get(payload, "collect");
        if (body && collect)
            json_object_set(body, "collect", collect);
        json_t *lim = json_object_get(payload, "limits");
        for (int i = 0; i < TC_LIMIT__COUNT; i++)
            j->limits[i] = json_integer_value(json_object_get(lim, tc_limit_names[i]));
        if (!body || tc_exec_request_parse(body, &req, &errors) < 0)
            why = "the approved payload no longer validates";
        else if (!(spec = tc_exec_build_spec(tool, &req, j->limits, j->id)))
            why = "out of memory";
    }
    char *lease_why = NULL;
    if (!why) {
        int lrc = tc_broker_lease(w->conn, w->srv->keys, j->tenant_id, tool, j->id,
                                  j->limits[TC_LIMIT_TIMEOUT_MS], &j->grant, &lease_why);
        if (lrc == 0 && tc_grant_apply_spec(j->grant, spec) < 0)
            lrc = -ENOMEM;
        if (lrc < 0)
            why = lease_why ? lease_why : "the credentials of this tool could not be leased";
    }
    if (why) {
        refuse(w, j, why);
        job_free(j);
    } else {
        int rc = -ESHUTDOWN;
        if (tc_server_begin(w->srv)) {
            rc = tc_launcher_submit(w->srv->launcher, spec, on_job_result, j);
            tc_server_end(w->srv);
        }
        if (rc < 0) {
            refuse(w, j, rc == -EAGAIN ? "no sandbox slot was free" : "the launcher is unavailable");
            job_free(j);
        } else {
            w->running++;
        }
    }
    free(lease_why);
    json_decref(spec);
    json_decref(body);
    json_decref(errors);
    json_decref(payload);
    tc_exec_request_done(&req);
    tc_policy_unref(policy);
}

static void claim(struct tc_worker *w)
{
    unsigned cap = (unsigned)w->srv->cfg->max_sandboxes / 2 + 1;
    while (!w->stopping && w->running < cap) {
        const char *p[] = {w->instance_str};
        PGresult *r = tc_db_exec(
            w->conn,
            "UPDATE executions SET status = 'running', claimed_by = $1, started_at = now()"
            " WHERE id = (SELECT id FROM executions WHERE status = 'queued'"
            "             ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING id, tenant_id, coalesce(api_key_id::text, ''), tool,"
            " coalesce(request_id, ''), to_char(created_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
            " limits::text",
            1, p);
        if (!r || PQntuples(r) != 1) {
            PQclear(r);
            return;
        }
        struct job *j = calloc(1, sizeof(*j));
        if (!j) {
            PQclear(r);
            return;
        }
        j->w = w;
        snprintf(j->id, sizeof(j->id), "%s", PQgetvalue(r, 0, 0));
        snprintf(j->tenant_id, sizeof(j->tenant_id), "%s", PQgetvalue(r, 0, 1));
        snprintf(j->key_id, sizeof(j->key_id), "%s", PQgetvalue(r, 0, 2));
        snprintf(j->tool, sizeof(j->tool), "%s", PQgetvalue(r, 0, 3));
        snprintf(j->request_id, sizeof(j->request_id), "%s", PQgetvalue(r, 0, 4));
        snprintf(j->created_at, sizeof(j->created_at), "%s", PQgetvalue(r, 0, 5));
        /* The limits recorded at request time, so that a refusal (before the payload is
         * trusted) still reports them; a run takes them from the approved payload. */
        json_t *lim = json_loads(PQgetvalue(r, 0, 6), 0, NULL);
        for (int k = 0; k < TC_LIMIT__COUNT; k++)
            j->limits[k] = json_integer_value(json_object_get(lim, tc_limit_names[k]));
        json_decref(lim);
        PQclear(r);
        tc_log(TC_LOG_INFO, "claimed approved execution", "{s:s, s:i}", "execution_id", j->id,
               "instance", w->instance_id);
        start_job(w, j);
    }
}

static void record_finished(struct tc_worker *w)
{
    pthread_mutex_lock(&w->lock);
    struct job *list = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->lock);
    while (list) {
        struct job *j = list;
        list = j->next;
        record(w, j, j->result, "execution.complete");
        job_free(j);
        w->running--;
    }
}

/* Executions claimed by a process whose advisory lock is free: that process is gone. */
static void sweep_interrupted(struct tc_worker *w)
{
    PGresult *r = tc_db_exec(
        w->conn,
        "SELECT e.id, e.tenant_id, coalesce(e.api_key_id::text, ''), e.tool,"
        " coalesce(e.request_id, ''), to_char(e.created_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
        " e.limits::text FROM executions e"
        " WHERE e.status = 'running' AND e.claimed_by IS NOT NULL AND NOT EXISTS ("
        "   SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = " INSTANCE_LOCK_CLASS
        "   AND l.objid = e.claimed_by AND l.objsubid = 2 AND l.granted) LIMIT 100",
        0, NULL);
    for (int i = 0; r && i < PQntuples(r); i++) {
        struct job j = {.w = w};
        snprintf(j.id, sizeof(j.id), "%s", PQgetvalue(r, i, 0));
        snprintf(j.tenant_id, sizeof(j.tenant_id), "%s", PQgetvalue(r, i, 1));
        snprintf(j.key_id, sizeof(j.key_id), "%s", PQgetvalue(r, i, 2));
        snprintf(j.tool, sizeof(j.tool), "%s", PQgetvalue(r, i, 3));
        snprintf(j.request_id, sizeof(j.request_id), "%s", PQgetvalue(r, i, 4));
        snprintf(j.created_at, sizeof(j.created_at), "%s", PQgetvalue(r, i, 5));
        json_t *lim = json_loads(PQgetvalue(r, i, 6), 0, NULL);
        for (int k = 0; k < TC_LIMIT__COUNT; k++)
            j.limits[k] = json_integer_value(json_object_get(lim, tc_limit_names[k]));
        json_decref(lim);
        json_t *res = json_pack("{s:s, s:s}", "status", "failed", "error", "interrupted");
        tc_log(TC_LOG_WARN, "execution interrupted by a crashed server process", "{s:s}",
               "execution_id", j.id);
        record(w, &j, res, "execution.interrupted");
        json_decref(res);
    }
    PQclear(r);
}

static void drain_notifications(struct tc_worker *w, bool *ret_queue)
{
    PQconsumeInput(w->listen_conn);
    PGnotify *n;
    while ((n = PQnotifies(w->listen_conn))) {
        if (strcmp(n->relname, "toolcage_queue") == 0)
            *ret_queue = true;
        else if (strcmp(n->relname, "toolcage_done") == 0 && tc_uuid_valid(n->extra))
            tc_waiters_wake(n->extra);
        PQfreemem(n);
    }
}

static bool reconnect(PGconn **c, const char *conninfo)
{
    if (*c && PQstatus(*c) == CONNECTION_OK)
        return true;
    if (*c)
        PQreset(*c);
    else
        *c = tc_db_connect(conninfo, NULL);
    return *c && PQstatus(*c) == CONNECTION_OK;
}

static bool listen_on(struct tc_worker *w)
{
    if (!reconnect(&w->listen_conn, w->srv->cfg->database_url))
        return false;
    PGresult *r = PQexec(w->listen_conn, "LISTEN toolcage_queue; LISTEN toolcage_done");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

static void *worker_main(void *arg)
{
    struct tc_worker *w = arg;
    int64_t last_sweep = 0, last_interrupt = 0;
    bool listening = listen_on(w);
    for (;;) {
        struct pollfd fds[2] = {{.fd = w->wake_fd, .events = POLLIN},
                                {.fd = listening ? PQsocket(w->listen_conn) : -1, .events = POLLIN}};
        poll(fds, 2, 200);
        if (fds[0].revents & POLLIN) {
            uint64_t v;
            ssize_t n = read(w->wake_fd, &v, sizeof(v));
            (void)n;
        }
        bool queue = false;
        if (listening)
            drain_notifications(w, &queue);
        if (!reconnect(&w->conn, w->srv->cfg->database_url))
            continue;
        record_finished(w);
        pthread_mutex_lock(&w->lock);
        bool stopping = w->stopping;
        pthread_mutex_unlock(&w->lock);
        if (stopping) {
            if (w->running == 0)
                break;
            continue;
        }
        int64_t now = tc_now_ms();
        tc_waiters_expire(now);
        if (!listening || PQstatus(w->listen_conn) != CONNECTION_OK)
            listening = listen_on(w);
        if (queue || now - last_sweep >= 1000) {
            claim(w);
        }
        if (now - last_sweep >= 1000) {
            last_sweep = now;
            if (tc_approval_expire_due(w->conn, w->srv->keys) < 0)
                tc_log(TC_LOG_WARN, "approval expiry sweep failed", NULL);
        }
        if (now - last_interrupt >= 2000) {
            last_interrupt = now;
            sweep_interrupted(w);
        }
    }
    return NULL;
}

int tc_worker_start(struct tc_server *srv, struct tc_worker **ret_worker, char **ret_error)
{
    struct tc_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->srv = srv;
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&w->lock, NULL);
    w->lock_conn = tc_db_connect(srv->cfg->database_url, ret_error);
    w->conn = w->lock_conn ? tc_db_connect(srv->cfg->database_url, ret_error) : NULL;
    if (w->wake_fd < 0 || !w->conn)
        goto fail;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    const char *p[] = {host};
    PGresult *r = tc_db_exec(w->lock_conn, "INSERT INTO instances (hostname) VALUES ($1) RETURNING id",
                             1, p);
    if (!r)
        goto fail_db;
    w->instance_id = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
    snprintf(w->instance_str, sizeof(w->instance_str), "%d", w->instance_id);
    PQclear(r);
    const char *p2[] = {w->instance_str};
    r = tc_db_exec(w->lock_conn, "SELECT pg_advisory_lock(" INSTANCE_LOCK_CLASS ", $1::int)", 1, p2);
    if (!r)
        goto fail_db;
    PQclear(r);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        goto fail;
    w->started = true;
    *ret_worker = w;
    return 0;
fail_db:
    if (ret_error)
        *ret_error = strdup(PQerrorMessage(w->lock_conn));
fail:
    tc_worker_stop(w);
    return -EIO;
}

void tc_worker_quiesce(struct tc_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_mutex_unlock(&w->lock);
    wake(w);
}

void tc_worker_stop(struct tc_worker *w)
{
    if (!w)
        return;
    if (w->started) {
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_mutex_unlock(&w->lock);
        wake(w);
        pthread_join(w->thread, NULL);
    }
    PQfinish(w->conn);
    PQfinish(w->listen_conn);
    PQfinish(w->lock_conn); /* releases the instance lock */
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
