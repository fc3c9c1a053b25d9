#include "server/worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sodium.h>
#include <unistd.h>

#include "execution/quota.h"
#include "execution/request.h"
#include "approval/approval.h"
#include "audit/audit.h"
#include "broker/leases.h"
#include "common/util.h"
#include "policy/policy.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "core/db.h"
#include "execution/record.h"
#include "server/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "server/recorder.h"
#include "server/slotq.h"
#include "server/waiters.h"

#define INSTANCE_LOCK_CLASS "7715"
#define HEARTBEAT_MS        500
#define MAX_SUSPECTS        64

struct job {
    struct tc_worker *w;
    char id[37], tenant_id[37], key_id[37], tool[65], request_id[65], created_at[32];
    int claimed_by; /* this instance's id when it claimed the job */
    int64_t limits[TC_LIMIT__COUNT];
    json_t *findings;        /* the pre-screen's, from the approval */
    struct tc_grant *grant;  /* credentials leased to this run (broker/leases.h) */
    struct tc_redactor *red; /* the live events' (srv->run_stream_open), or NULL */
    void *stream;            /* its output as live events, or NULL */
};

/* An instance seen with executions `running` and its lock free, since when (this clock). */
struct suspect {
    int id;
    int64_t since_ms;
    bool seen;
};

struct tc_worker {
    struct tc_server *srv;
    pthread_t thread, monitor, clock;
    bool started, monitor_started, clock_started;
    int wake_fd; /* eventfd: stop requested or a job finished */
    pthread_mutex_t lock;
    pthread_cond_t monitor_cv;
    _Atomic bool stopping;      /* read by the threads without the lock */
    _Atomic bool draining;      /* claims nothing more (tc_worker_drain) */
    _Atomic unsigned running;   /* claimed jobs not recorded yet */
    PGconn *lock_conn;          /* the monitor thread's */
    PGconn *listen_conn, *conn; /* the worker thread's */
    struct suspect suspects[MAX_SUSPECTS];
    size_t nsuspects;
};

int tc_worker_instance_id(const struct tc_worker *w)
{
    return w ? w->srv->instance_id : 0;
}

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
    if (j->stream) /* it ended without a stored outcome */
        j->w->srv->run_stream_end(j->stream, NULL);
    tc_redactor_free(j->red);
    json_decref(j->findings);
    tc_grant_free(j->grant);
    free(j);
}

static json_t *actor_key(const char *key_id)
{
    return json_pack("{s:s, s:s}", "type", "api_key", "id", key_id);
}

/* The Execution object of a launcher result (on a recorder thread). */
static json_t *job_view(void *userdata, json_t *result)
{
    struct job *j = userdata;
    struct tc_worker *w = j->w;
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    /* The tool's redaction rules as the policy says now; every rule, those off by default
     * too, if the tool is gone (what it enabled is not known any more). */
    struct tc_policy *policy = tc_server_policy(w->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, j->tool);
    struct tc_redactor *red = NULL;
    size_t nrules;
    const char *const *rules = tc_redact_rule_names(&nrules);
    int rrc = tool ? tc_exec_redactor(tool, w->srv->cfg->state_dir, &red)
                   : tc_redactor_new(NULL, 0, rules, nrules,
                                     (const char *const[]){w->srv->cfg->state_dir}, 1, &red);
    tc_policy_unref(policy);
    struct tc_exec_filter filter = {.redactor = red};
    filter.secrets = tc_grant_values(j->grant, &filter.nsecrets);
    json_t *view = rrc < 0 ? NULL
                           : tc_exec_view(j->id, j->tool, result, j->limits, j->created_at,
                                          finished, &filter, j->findings);
    tc_redactor_free(red);
    if (view && !tc_grant_empty(j->grant))
        json_object_set_new(view, "credentials", tc_grant_summary(j->grant));
    return view;
}

static void job_recorded(void *userdata, int rc, json_t *view)
{
    struct job *j = userdata;
    struct tc_worker *w = j->w;
    if (j->stream)
        w->srv->run_stream_end(j->stream, rc == 0 || rc == -ESTALE ? view : NULL);
    j->stream = NULL;
    if (rc == -ETIMEDOUT)
        tc_log(TC_LOG_WARN, "an approved execution's outcome is not stored yet; it is kept",
               "{s:s}", "execution_id", j->id);
    job_free(j);
    w->running--;
    wake(w);
}

/* Hand the outcome to the recorder, which stores it (retrying, never dropping it), revokes
 * the execution's leases and tokens, and then frees the job. */
static void record(struct tc_worker *w, struct job *j, json_t *result, const char *action)
{
    json_t *actor = actor_key(j->key_id);
    struct tc_record_outcome o = {.ids = {.exec_id = j->id,
                                          .tenant_id = j->tenant_id,
                                          .tool = j->tool,
                                          .request_id = j->request_id,
                                          .claimed_by = j->claimed_by,
                                          .actor = actor},
                                  .action = action,
                                  .raw = result,
                                  .build = job_view,
                                  .done = job_recorded,
                                  .userdata = j,
                                  .release_credentials = true};
    if (!actor || tc_recorder_finish(w->srv->recorder, &o) < 0) {
        tc_log(TC_LOG_ERROR, "recording an approved execution failed: out of memory", "{s:s}",
               "execution_id", j->id);
        job_recorded(j, -ENOMEM, NULL);
    }
    json_decref(actor);
}

static void on_job_chunk(void *userdata, int kind, const char *data, size_t len)
{
    struct job *j = userdata;
    if (j->stream)
        j->w->srv->run_stream_chunk(j->stream, kind, data, len);
}

static void on_job_result(void *userdata, json_t *result)
{
    struct job *j = userdata;
    record(j->w, j, result, "execution.complete");
}

/* The launcher has the sandbox ready: record the start, then it runs. */
static void on_job_ready(void *userdata, const char *id)
{
    struct job *j = userdata;
    json_t *actor = actor_key(j->key_id);
    struct tc_record_ids ids = {.exec_id = j->id,
                                .tenant_id = j->tenant_id,
                                .tool = j->tool,
                                .request_id = j->request_id,
                                .claimed_by = j->claimed_by,
                                .actor = actor};
    (void)id;
    (void)tc_recorder_start_run(j->w->srv->recorder, &ids);
    json_decref(actor);
}

static void refuse(struct tc_worker *w, struct job *j, const char *why)
{
    json_t *res = json_pack("{s:s, s:s}", "status", "error", "error", why);
    tc_log(TC_LOG_ERROR, "approved execution refused", "{s:s, s:s}", "execution_id", j->id,
           "reason", why);
    record(w, j, res, "execution.refused");
    json_decref(res);
}

/* Give back a sandbox slot taken with reserve_slot() and not used. */
static void release_slot(struct tc_worker *w)
{
    if (tc_server_begin(w->srv)) {
        tc_launcher_unreserve(w->srv->launcher);
        tc_server_end(w->srv);
    }
}

/* Put a claimed execution that never started back in the queue (the launcher is stopping
 * or gone): an approved call is not lost to a restart. In the caller's transaction. */
static bool requeue_tx(PGconn *c, const struct tc_keys *keys, const char *exec_id,
                       const char *tenant_id, const char *tool, int claimed_by, const char *why)
{
    char claimed[16];
    snprintf(claimed, sizeof(claimed), "%d", claimed_by);
    const char *p[] = {exec_id, claimed};
    PGresult *r =
        tc_db_exec(c,
                   "UPDATE executions SET status = 'queued', claimed_by = NULL, started_at = NULL"
                   " WHERE id = $1 AND status = 'running' AND claimed_by = $2::int"
                   " AND code_started_at IS NULL RETURNING attempts",
                   2, p);
    bool ok = r && PQntuples(r) == 1;
    int attempts = ok ? (int)strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (!ok)
        return false;
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:i, s:i, s:s}", "action",
                           "execution.requeued", "tenant_id", tenant_id, "actor", "type", "system",
                           "id", "worker", "tool", tool, "execution_id", exec_id, "instance",
                           claimed_by, "attempts", attempts, "reason", why);
    ok = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0 &&
         tc_db_command(c, "NOTIFY toolcage_queue");
    json_decref(ev);
    return ok;
}

static void requeue(struct tc_worker *w, struct job *j, const char *why)
{
    bool ok = tc_db_command(w->conn, "BEGIN") &&
              requeue_tx(w->conn, w->srv->keys, j->id, j->tenant_id, j->tool, j->claimed_by, why);
    ok = tc_db_command(w->conn, ok ? "COMMIT" : "ROLLBACK") && ok;
    if (!ok) {
        refuse(w, j, why); /* it did not run: closed as an error rather than left running */
        return;
    }
    if (tc_broker_release(w->conn, w->srv->keys, j->id) < 0)
        tc_log(TC_LOG_WARN, "revoking a requeued execution's credentials failed", "{s:s}",
               "execution_id", j->id);
    tc_log(TC_LOG_INFO, "claimed execution put back in the queue", "{s:s, s:s}", "execution_id",
           j->id, "reason", why);
    job_free(j);
    w->running--;
}

/* Start one claimed execution: only the stored, approved payload runs. */
static void start_job(struct tc_worker *w, struct job *j)
{
    const char *p[] = {j->id};
    PGresult *r = tc_db_exec(w->conn,
                             "SELECT payload::text, payload_hash, findings::text"
                             " FROM approvals WHERE execution_id = $1"
                             " AND status = 'approved'",
                             1, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        release_slot(w);
        refuse(w, j, "no approved approval for this execution");
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
    json_t *body = NULL, *errors = NULL, *spec = NULL, *image = NULL;
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
        body =
            json_pack("{s:O, s:O, s:O}", "tool", json_object_get(payload, "tool"), "code",
                      json_object_get(payload, "code"), "files", json_object_get(payload, "files"));
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
        else if (tc_exec_image(tool, w->srv->cfg->state_dir, &image) < 0)
            why = "the tool's image is not in this server's image store";
        else if (!(spec = tc_exec_build_spec(tool, &req, j->limits, j->id, image)))
            why = "out of memory";
        else
            tc_exec_spec_tenant(spec, j->tenant_id);
        json_decref(image);
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
        release_slot(w);
        refuse(w, j, why);
    } else {
        /* Held until the recorder has written its start (on_job_ready). */
        json_object_set_new(spec, "hold", json_true());
        struct tc_launcher_job lj = {
            .done = on_job_result, .ready = on_job_ready, .userdata = j, .reserved = true};
        /* Its output live for whoever follows it (the client that asked, held, or anyone,
         * on any replica: through the database, api/stream.h "shared"). */
        if (w->srv->run_stream_open &&
            tc_exec_redactor(tool, w->srv->cfg->state_dir, &j->red) == 0) {
            size_t nsec = 0;
            const char *const *sec = tc_grant_values(j->grant, &nsec);
            j->stream =
                w->srv->run_stream_open(j->id, j->red, sec, nsec, j->limits[TC_LIMIT_OUTPUT_BYTES]);
        }
        if (j->stream) {
            json_object_set_new(spec, "stream", json_true());
            lj.chunk = on_job_chunk;
        }
        int rc = -ESHUTDOWN;
        if (tc_server_begin(w->srv)) {
            rc = tc_launcher_submit_job(w->srv->launcher, spec, &lj);
            tc_server_end(w->srv);
        }
        if (rc == -EPIPE || rc == -ESHUTDOWN)
            requeue(w, j, "the launcher is unavailable");
        else if (rc < 0)
            refuse(w, j, "the sandbox could not be submitted");
    }
    free(lease_why);
    json_decref(spec);
    json_decref(body);
    json_decref(errors);
    json_decref(payload);
    tc_exec_request_done(&req);
    tc_policy_unref(policy);
}

/* A sandbox slot for one more claim: 0, or the launcher has none free (or is gone). */
static int reserve_slot(struct tc_worker *w)
{
    int r = -ESHUTDOWN;
    if (tc_server_begin(w->srv)) {
        r = tc_launcher_reserve(w->srv->launcher);
        tc_server_end(w->srv);
    }
    return r;
}

/* Anything queued at all? (A slot is reserved only then: an idle poll holding one would
 * turn a direct call away as "overloaded".) */
static bool queued_work(struct tc_worker *w)
{
    PGresult *r =
        tc_db_exec(w->conn,
                   "SELECT 1 FROM executions WHERE status = 'queued' AND session_id IS NULL"
                   " LIMIT 1",
                   0, NULL);
    bool any = r && PQntuples(r) == 1;
    PQclear(r);
    return any;
}

/* Claim one approved call in a transaction of w->conn: among the queued rows (oldest first
 * within a tenant, tenants with fewest running first, so one tenant's backlog does not starve
 * another's single call), the first whose tenant is under its concurrency quota (admitted
 * like a direct call, execution/quota.h). The row is `running` under this instance when this
 * returns a result; NULL: nothing claimable now (or a database error; nothing changed). */
static PGresult *claim_one(struct tc_worker *w, const char *me)
{
    PGconn *c = w->conn;
    if (!tc_db_command(c, "BEGIN"))
        return NULL;
    PGresult *cand = tc_db_exec(c,
                                "SELECT e.id, e.tenant_id FROM executions e"
                                " WHERE e.status = 'queued' AND e.session_id IS NULL"
                                " ORDER BY (SELECT count(*) FROM executions x"
                                "           WHERE x.tenant_id = e.tenant_id"
                                "           AND x.status = 'running'), e.created_at"
                                " LIMIT 32 FOR UPDATE OF e SKIP LOCKED",
                                0, NULL);
    PGresult *r = NULL;
    for (int i = 0; cand && i < PQntuples(cand) && !r; i++) {
        struct tc_quota q;
        int qrc =
            tc_quota_admit_tx(c, PQgetvalue(cand, i, 1), w->srv->cfg->tenant_max_concurrent, &q);
        if (qrc == -EDQUOT)
            continue; /* its tenant is at its limit: it stays queued for now */
        if (qrc < 0)
            break;
        const char *p[] = {me, PQgetvalue(cand, i, 0)};
        r = tc_db_exec(c,
                       "UPDATE executions SET status = 'running', claimed_by = $1,"
                       " started_at = now(), attempts = attempts + 1"
                       " WHERE id = $2 AND status = 'queued'"
                       " RETURNING id, tenant_id, coalesce(api_key_id::text, ''), tool,"
                       " coalesce(request_id, ''), " TC_SQL_ISO("created_at") ", limits::text",
                       2, p);
        if (r && PQntuples(r) != 1) {
            PQclear(r);
            r = NULL;
        }
        if (!r)
            break;
    }
    PQclear(cand);
    if (r && !tc_db_command(c, "COMMIT")) {
        PQclear(r); /* not committed: not claimed */
        r = NULL;
    }
    if (!r)
        (void)tc_db_command(c, "ROLLBACK");
    return r;
}

static void claim(struct tc_worker *w)
{
    unsigned cap = (unsigned)w->srv->cfg->max_sandboxes / 2 + 1;
    /* Only with the instance lock (a sweeper could otherwise take the row for a dead
     * instance's) and with a slot to run it in (else it waits, queued, for a slot). */
    while (!w->stopping && !w->draining && w->srv->instance_locked && w->running < cap &&
           queued_work(w) && reserve_slot(w) == 0) {
        char me[16];
        int my_id = w->srv->instance_id;
        snprintf(me, sizeof(me), "%d", my_id);
        PGresult *r = claim_one(w, me);
        struct job *j = r ? calloc(1, sizeof(*j)) : NULL;
        if (!j) {
            /* Nothing claimable (or out of memory: the row stays claimed; a restart's sweep
             * requeues it, it never started). */
            PQclear(r);
            release_slot(w);
            return;
        }
        w->running++;
        j->w = w;
        j->claimed_by = my_id;
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
               "instance", my_id);
        start_job(w, j);
    }
}

/* ---- the sweeper ---- */

/* Close one dead instance's running executions (at most 100 per call), in one transaction
 * that holds its lock: requeue approved calls that never started, mark the rest
 * interrupted. */
static void sweep_instance(struct tc_worker *w, int dead)
{
    PGconn *c = w->conn;
    char id[16];
    snprintf(id, sizeof(id), "%d", dead);
    const char *p[] = {id};
    char released[100][37], ended[100][37]; /* executions' and sessions' ids, for the broker */
    int nreleased = 0, nended = 0, interrupted = 0, requeued = 0;
    if (!tc_db_command(c, "BEGIN"))
        return;
    /* Its lock free now (and kept free until we commit), and silent for the grace period. */
    PGresult *r = tc_db_exec(
        c,
        "SELECT pg_try_advisory_xact_lock(" INSTANCE_LOCK_CLASS ", $1::int)"
        " AND coalesce((SELECT heartbeat_at < now() - make_interval(secs => $2::float8 / 1000)"
        "               FROM instances WHERE id = $1::int), true)",
        2, (const char *const[]){id, TC_STRINGIFY(TC_SWEEP_GRACE_MS)});
    bool dead_now = r && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!dead_now) {
        tc_db_command(c, "ROLLBACK");
        return;
    }
    /* Declared dead first: should it come back, it is fenced (see the monitor). */
    PQclear(tc_db_exec(
        c, "UPDATE instances SET dead_at = coalesce(dead_at, now()) WHERE id = $1::int", 1, p));
    /* Its sessions ended with it (api/sessions.c): said so, their credentials revoked below. */
    r = tc_db_exec(c,
                   "UPDATE sessions SET status = 'ended', ended_at = now(),"
                   " ended_reason = 'server_restart' WHERE id IN (SELECT id FROM sessions"
                   " WHERE status = 'active' AND instance_id = $1::int LIMIT 100 FOR UPDATE)"
                   " RETURNING id, tenant_id, tool, calls",
                   1, p);
    bool sessions_ok = r != NULL;
    for (int i = 0; sessions_ok && i < PQntuples(r); i++) {
        json_t *ev =
            json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:i}", "action", "session.end",
                      "tenant_id", PQgetvalue(r, i, 1), "actor", "type", "system", "id", "sweeper",
                      "tool", PQgetvalue(r, i, 2), "session_id", PQgetvalue(r, i, 0), "reason",
                      "server_restart", "calls", atoi(PQgetvalue(r, i, 3)));
        sessions_ok = ev && tc_audit_append_tx(c, w->srv->keys, ev, NULL) == 0;
        json_decref(ev);
        /* a call it held for a person is withdrawn with it */
        json_t *sys = json_pack("{s:s, s:s}", "type", "system", "id", "sweeper");
        sessions_ok = sessions_ok && sys &&
                      tc_approval_session_ended_tx(c, w->srv->keys, PQgetvalue(r, i, 0), sys) >= 0;
        json_decref(sys);
        snprintf(ended[nended++], sizeof(ended[0]), "%s", PQgetvalue(r, i, 0));
    }
    PQclear(r);
    if (!sessions_ok) {
        tc_db_command(c, "ROLLBACK");
        return;
    }
    r = tc_db_exec(
        c,
        "SELECT e.id, e.tenant_id, coalesce(e.api_key_id::text, ''), e.tool,"
        " coalesce(e.request_id, ''), " TC_SQL_ISO(
            "e.created_at") ","
                            " e.limits::text, e.code_started_at IS NOT NULL, coalesce(a.status = "
                            "'approved', false),"
                            " e.attempts, e.session_id IS NOT NULL"
                            " FROM executions e LEFT JOIN approvals a ON a.execution_id = e.id"
                            " WHERE e.status = 'running' AND e.claimed_by = $1::int"
                            " ORDER BY e.created_at LIMIT 100 FOR UPDATE OF e",
        1, p);
    bool ok = r != NULL;
    for (int i = 0; ok && i < PQntuples(r); i++) {
        struct job j = {.w = w, .claimed_by = dead};
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
        bool started = strcmp(PQgetvalue(r, i, 7), "t") == 0;
        bool approved = strcmp(PQgetvalue(r, i, 8), "t") == 0;
        int attempts = (int)strtol(PQgetvalue(r, i, 9), NULL, 10);
        bool in_session = strcmp(PQgetvalue(r, i, 10), "t") == 0; /* its session died too */
        if (approved && !started && !in_session && attempts < TC_MAX_ATTEMPTS) {
            /* It never began: running it now is running it once, as approved. */
            ok = requeue_tx(c, w->srv->keys, j.id, j.tenant_id, j.tool, dead,
                            "the instance that claimed it died before it started");
            requeued++;
        } else {
            char finished[32];
            tc_iso8601(tc_wall_ms(), finished);
            json_t *res =
                json_pack("{s:s, s:s}", "status", "failed", "error",
                          started ? "interrupted_after_start" : "interrupted_before_start");
            struct tc_exec_filter filter = {0};
            json_t *view = res ? tc_exec_view(j.id, j.tool, res, j.limits, j.created_at, finished,
                                              &filter, NULL)
                               : NULL;
            json_decref(res);
            json_t *actor = actor_key(j.key_id);
            /* An approved call that began may have had its effect: never re-run, a human
             * looks (console, API "needs_review"). */
            bool review = approved && started;
            if (view)
                json_object_set_new(view, "needs_review", json_boolean(review));
            struct tc_finish f = {.tenant_id = j.tenant_id,
                                  .exec_id = j.id,
                                  .tool = j.tool,
                                  .request_id = j.request_id[0] ? j.request_id : NULL,
                                  .claimed_by = dead,
                                  .actor = actor,
                                  .view = view,
                                  .action = "execution.interrupted",
                                  .needs_review = review};
            ok = view && actor && tc_execution_finish_tx(c, w->srv->keys, &f) == 0;
            json_decref(view);
            json_decref(actor);
            interrupted++;
            tc_log(TC_LOG_WARN, "execution interrupted by a dead server process",
                   "{s:s, s:i, s:b, s:b}", "execution_id", j.id, "instance", dead, "started",
                   started, "needs_review", review);
        }
        if (nreleased < 100)
            snprintf(released[nreleased++], sizeof(released[0]), "%s", j.id);
    }
    PQclear(r);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    if (!ok) {
        tc_log(TC_LOG_WARN, "sweeping a dead instance failed; retried", "{s:i, s:s}", "instance",
               dead, "error", tc_db_error(c));
        return;
    }
    if (interrupted || requeued)
        tc_log(TC_LOG_INFO, "swept a dead instance", "{s:i, s:i, s:i}", "instance", dead,
               "interrupted", interrupted, "requeued", requeued);
    for (int i = 0; i < nended; i++) /* the rest of its sessions, if more: the next sweep */
        if (tc_broker_release(c, w->srv->keys, ended[i]) < 0)
            tc_log(TC_LOG_ERROR, "revoking a session's credentials failed", "{s:s}", "session_id",
                   ended[i]);
    for (int i = 0; i < nreleased; i++) {
        if (tc_broker_release(c, w->srv->keys, released[i]) < 0)
            tc_log(TC_LOG_ERROR, "revoking an execution's credentials failed", "{s:s}",
                   "execution_id", released[i]);
        tc_waiters_wake(released[i]);
    }
}

/* Instances with running executions and a free lock. One seen so, continuously, for the
 * grace period is swept: a live process that lost its lock (PostgreSQL restarted) takes it
 * back well within it. */
static void sweep_interrupted(struct tc_worker *w)
{
    char me[16];
    snprintf(me, sizeof(me), "%d", (int)w->srv->instance_id);
    const char *p[] = {me};
    PGresult *r =
        tc_db_exec(w->conn,
                   "SELECT DISTINCT e.claimed_by FROM (SELECT claimed_by FROM executions"
                   "   WHERE status = 'running' AND claimed_by IS NOT NULL"
                   "   UNION SELECT instance_id FROM sessions WHERE status = 'active') e"
                   " WHERE e.claimed_by <> $1::int"
                   /* pg_locks lists every database's locks: only this one's say who lives
                    * (another toolcage on the cluster has its own instance 1, 2, ...) */
                   " AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory'"
                   "   AND l.database = (SELECT oid FROM pg_database"
                   "                     WHERE datname = current_database())"
                   "   AND l.classid = " INSTANCE_LOCK_CLASS " AND l.objid = e.claimed_by"
                   "   AND l.objsubid = 2 AND l.granted) LIMIT 32",
                   1, p);
    if (!r)
        return;
    int64_t now = tc_now_ms();
    for (size_t k = 0; k < w->nsuspects; k++)
        w->suspects[k].seen = false;
    int due[32], ndue = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        int id = (int)strtol(PQgetvalue(r, i, 0), NULL, 10);
        size_t k = 0;
        while (k < w->nsuspects && w->suspects[k].id != id)
            k++;
        if (k == w->nsuspects) {
            if (k == MAX_SUSPECTS)
                continue;
            w->suspects[w->nsuspects++] = (struct suspect){.id = id, .since_ms = now};
        }
        w->suspects[k].seen = true;
        if (now - w->suspects[k].since_ms >= TC_SWEEP_GRACE_MS && ndue < 32)
            due[ndue++] = id;
    }
    PQclear(r);
    /* Forget those not seen this time (their lock is held again, or nothing runs there). */
    size_t kept = 0;
    for (size_t k = 0; k < w->nsuspects; k++)
        if (w->suspects[k].seen)
            w->suspects[kept++] = w->suspects[k];
    w->nsuspects = kept;
    for (int i = 0; i < ndue && w->srv->instance_locked && !w->stopping; i++)
        sweep_instance(w, due[i]);
}

/* ---- the instance lock ---- */

/* Register this process and take its lock (on lock_conn). 0 or -EIO. */
static int register_instance(struct tc_worker *w)
{
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    const char *p[] = {host};
    PGresult *r =
        tc_db_exec(w->lock_conn, "INSERT INTO instances (hostname) VALUES ($1) RETURNING id", 1, p);
    if (!r)
        return -EIO;
    char id[16];
    snprintf(id, sizeof(id), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    const char *p2[] = {id};
    r = tc_db_exec(w->lock_conn, "SELECT pg_advisory_lock(" INSTANCE_LOCK_CLASS ", $1::int)", 1,
                   p2);
    if (!r)
        return -EIO;
    PQclear(r);
    w->srv->instance_id = (int)strtol(id, NULL, 10);
    return 0;
}

/* 1 alive (heartbeat written), 0 declared dead by a sweeper (fenced), -EIO. */
static int heartbeat(struct tc_worker *w)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", (int)w->srv->instance_id);
    const char *p[] = {id};
    PGresult *r = tc_db_exec(w->lock_conn,
                             "UPDATE instances SET heartbeat_at = now()"
                             " WHERE id = $1::int AND dead_at IS NULL RETURNING 1",
                             1, p);
    int rc = !r ? -EIO : PQntuples(r) == 1 ? 1 : 0;
    PQclear(r);
    return rc;
}

/* Take the lock back after a reconnect. True when held again. */
static bool relock(struct tc_worker *w)
{
    if (!tc_db_ensure(&w->lock_conn, w->srv->cfg->database_url))
        return false;
    int old = w->srv->instance_id;
    char id[16];
    snprintf(id, sizeof(id), "%d", old);
    const char *p[] = {id};
    PGresult *r = tc_db_exec(w->lock_conn,
                             "SELECT pg_try_advisory_lock(" INSTANCE_LOCK_CLASS ", $1::int)", 1, p);
    bool got = r && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!got)
        return false; /* a sweeper holds it this instant, or the old session lingers */
    int hb = heartbeat(w);
    if (hb == 1)
        return true;
    PQclear(tc_db_exec(w->lock_conn, "SELECT pg_advisory_unlock(" INSTANCE_LOCK_CLASS ", $1::int)",
                       1, p));
    if (hb < 0)
        return false;
    /* Fenced: its running executions were closed as interrupted while it was away (their
     * results, when they come, are kept as late results). It carries on as a new instance. */
    if (register_instance(w) < 0)
        return false;
    tc_log(TC_LOG_WARN,
           "this process was declared dead while it had lost its database lock;"
           " it carries on as a new instance",
           "{s:i, s:i}", "old_instance", old, "instance", (int)w->srv->instance_id);
    return true;
}

/* The monitor thread: heartbeat while the lock is held; reconnect and take it back when the
 * lock connection broke. */
/* Rests ms on monitor_cv, or not at all once stopping: false then (tc_worker_quiesce). */
static bool rest(struct tc_worker *w, int64_t ms)
{
    struct timespec ts = tc_timespec_in(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&w->lock);
    if (!w->stopping)
        pthread_cond_timedwait(&w->monitor_cv, &w->lock, &ts);
    bool go_on = !w->stopping;
    pthread_mutex_unlock(&w->lock);
    return go_on;
}

static void *monitor_main(void *arg)
{
    struct tc_worker *w = arg;
    bool locked;
    do {
        locked = w->srv->instance_locked;
        if (locked && heartbeat(w) != 1) {
            w->srv->instance_locked = false;
            tc_log(TC_LOG_WARN,
                   "the instance lock is lost; this process claims, starts and sweeps"
                   " nothing until it has it back",
                   "{s:i, s:s}", "instance", (int)w->srv->instance_id, "error",
                   tc_db_error(w->lock_conn));
            locked = false;
        }
        if (!locked && relock(w)) {
            w->srv->instance_locked = true;
            tc_log(TC_LOG_INFO, "the instance lock is held again", "{s:i}", "instance",
                   (int)w->srv->instance_id);
            wake(w);
        }
    } while (rest(w, locked ? HEARTBEAT_MS : 200));
    return NULL;
}

/* ---- the deadlines' thread ----
 * A call queued for a sandbox slot and a long-poll are resumed at their deadlines by a thread
 * of their own, every 100 ms, whether or not the database answers (the worker thread's round
 * trips wait up to their bound, TOOLCAGE_DB_TIMEOUT_SECONDS + 5 s, when it does not: the
 * deadlines were that late then). A queued call's 503 needs no database; a long-poll's answer
 * reads the execution, and waits for the database as any read does. */
static void *clock_main(void *arg)
{
    struct tc_worker *w = arg;
    do {
        int64_t now = tc_now_ms();
        tc_waiters_expire(now);
        tc_slotq_expire(now);
        tc_slotq_pump(); /* slots a restarted launcher gave back without saying so */
    } while (rest(w, 100));
    return NULL;
}

/* ---- the worker thread ---- */

/* A cancel request (execution/cancel.h) reaches every server: the launcher that runs the
 * sandbox kills it (the others know no such id), and its outcome is recorded as any run's. */
static void cancel_run(struct tc_worker *w, const char *id)
{
    if (!tc_server_begin(w->srv))
        return; /* stopping: every sandbox is being killed anyway */
    int r = tc_launcher_cancel(w->srv->launcher, id);
    if (w->srv->cancel_session_call && w->srv->cancel_session_call(id) == 0)
        r = 0; /* a session's call: interrupted, the session lives on */
    tc_server_end(w->srv);
    tc_log(TC_LOG_INFO, "cancel requested", "{s:s, s:s}", "execution_id", id, "launcher",
           r == 0 ? "told" : strerror(-r));
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
        else if (strcmp(n->relname, "toolcage_cancel") == 0 && tc_uuid_valid(n->extra))
            cancel_run(w, n->extra);
        else if (strcmp(n->relname, "toolcage_follow") == 0 && tc_uuid_valid(n->extra) &&
                 w->srv->follow_asked)
            (void)w->srv->follow_asked(n->extra);
        PQfreemem(n);
    }
}

static bool listen_on(struct tc_worker *w)
{
    if (!tc_db_revive(&w->listen_conn, w->srv->cfg->database_url))
        return false;
    return tc_db_command(w->listen_conn, "LISTEN toolcage_queue; LISTEN toolcage_done;"
                                         " LISTEN toolcage_cancel; LISTEN toolcage_follow");
}

static void *worker_main(void *arg)
{
    struct tc_worker *w = arg;
    int64_t last_sweep = 0, last_interrupt = 0, last_output = 0;
    bool listening = listen_on(w);
    for (;;) {
        struct pollfd fds[2] = {
            {.fd = w->wake_fd, .events = POLLIN},
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
        if (w->stopping) {
            if (w->running == 0)
                break;
            continue;
        }
        int64_t now = tc_now_ms();
        if (!tc_db_ensure(&w->conn, w->srv->cfg->database_url))
            continue;
        if (!listening || PQstatus(w->listen_conn) != CONNECTION_OK)
            listening = listen_on(w);
        /* Without its lock the process claims nothing and sweeps nothing (see worker.h). */
        bool locked = w->srv->instance_locked;
        if (locked && (queue || now - last_sweep >= 1000)) {
            claim(w);
        }
        if (now - last_sweep >= 1000) {
            last_sweep = now;
            if (locked && tc_approval_expire_due(w->conn, w->srv->keys) < 0)
                tc_log(TC_LOG_WARN, "approval expiry sweep failed", NULL);
            /* reminders before expiry, for tenants that asked for them */
            if (locked && tc_approval_remind_due(w->conn, w->srv->public_url) < 0)
                tc_log(TC_LOG_WARN, "approval reminder sweep failed", NULL);
        }
        if (locked && now - last_interrupt >= 1000) {
            last_interrupt = now;
            sweep_interrupted(w);
        }
        if (locked && now - last_output >= 60000) { /* shared output a dead replica left */
            last_output = now;
            PGresult *r = tc_db_exec(w->conn,
                                     "DELETE FROM execution_output o USING executions e"
                                     " WHERE e.id = o.execution_id AND e.finished_at IS NOT NULL"
                                     " AND e.finished_at < now() - interval '1 minute'",
                                     0, NULL);
            PQclear(r);
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
    pthread_condattr_t ca; /* (a wall clock set back must not stretch a wait) */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->monitor_cv, &ca);
    pthread_condattr_destroy(&ca);
    w->lock_conn = tc_db_connect(srv->cfg->database_url, ret_error);
    w->conn = w->lock_conn ? tc_db_connect(srv->cfg->database_url, ret_error) : NULL;
    if (w->wake_fd < 0 || !w->conn)
        goto fail;
    if (register_instance(w) < 0)
        goto fail_db;
    srv->instance_locked = true;
    if (pthread_create(&w->monitor, NULL, monitor_main, w) != 0)
        goto fail;
    w->monitor_started = true;
    if (pthread_create(&w->clock, NULL, clock_main, w) != 0)
        goto fail;
    w->clock_started = true;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        goto fail;
    w->started = true;
    *ret_worker = w;
    return 0;
fail_db:
    if (ret_error)
        *ret_error = strdup(tc_db_error(w->lock_conn));
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
    pthread_cond_broadcast(&w->monitor_cv);
    pthread_mutex_unlock(&w->lock);
    wake(w);
}

void tc_worker_drain(struct tc_worker *w)
{
    if (w)
        w->draining = true;
}

void tc_worker_stop(struct tc_worker *w)
{
    if (!w)
        return;
    tc_worker_quiesce(w);
    if (w->started)
        pthread_join(w->thread, NULL);
    if (w->monitor_started)
        pthread_join(w->monitor, NULL);
    if (w->clock_started)
        pthread_join(w->clock, NULL);
    PQfinish(w->conn);
    PQfinish(w->listen_conn);
    PQfinish(w->lock_conn); /* releases the instance lock */
    w->srv->instance_locked = false;
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    pthread_cond_destroy(&w->monitor_cv);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
