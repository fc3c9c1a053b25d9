/* POST /v1/execute: validate, apply the tool's policy, then either hold the call for a
 * human (202 + approval) or record it and run it in the launcher without holding a worker
 * thread, record the result with its audit record, and answer. */
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/stream.h"
#include "server/auth.h"
#include "execution/request.h"
#include "approval/approval.h"
#include "audit/audit.h"
#include "broker/leases.h"
#include "common/util.h"
#include "policy/policy.h"
#include "policy/prescreen.h"
#include "policy/redact.h"
#include "sandbox/sandbox.h"
#include "core/db.h"
#include "execution/quota.h"
#include "execution/record.h"
#include "core/log.h"
#include "core/metrics.h"
#include "server/recorder.h"
#include "server/slotq.h"
#include "server/webhook.h"

struct exec_state {
    struct tc_request *r; /* the client's request; NULL once an asynchronous call was answered */
    struct tc_server *srv;
    struct tc_principal principal; /* copies: an asynchronous call outlives its request */
    char request_id[65];
    char id[37];
    char tool[65];
    char tool_policy[65]; /* the tool's definition (tc_approval_tool_digest) */
    char created_at[32];
    int64_t limits[TC_LIMIT__COUNT];
    int claimed_by;                /* this instance, when the execution was recorded as running */
    int record_rc;                 /* from the recorder (server/recorder.h), before it resumes us */
    json_t *view;                  /* the stored Execution (or what is stored instead), or NULL */
    char idem_key[256];            /* non-empty while this request owns an Idempotency-Key */
    struct tc_redactor *redactor;  /* the tool's redaction rules */
    json_t *findings;              /* the pre-screen's */
    struct tc_grant *grant;        /* credentials leased to this execution (broker/leases.h) */
    struct tc_exec_stream *stream; /* its live events (api/stream.h), or NULL */
    /* when each step ended (tc_now_us), for the Server-Timing header of the answer */
    int64_t t_begin, t_screened, t_recorded, t_submitted, t_ready, t_result;
    int64_t t_go; /* the go sent (execution.start stored): set with t_result (job.went_us) */
};

/* Server-Timing (W3C): where the time of a synchronous call went, in milliseconds. */
static void server_timing(const struct exec_state *st, char *out, size_t n)
{
    int64_t now = tc_now_us(), go = st->t_go;
    /* a call that waited for a sandbox slot: from its handler's first run to its last */
    bool queued = st->r->slot_deadline_ms != 0 && st->r->handler_us;
    const struct {
        const char *name;
        int64_t from, to;
    } ph[] = {/* headers, body, the key's check: to the handler (queued) or the screen */
              {"request", st->r->line_us, queued ? st->r->handler_us : st->t_begin},
              {"queue", queued ? st->r->handler_us : 0, st->t_begin}, /* the wait for a slot */
              {"auth", st->r->auth_us, st->r->authed_us}, /* the key's lookup (in request) */
              {"screen", st->t_begin, st->t_screened},    /* parse, policy, pre-screen */
              {"admit", st->t_screened, st->t_recorded},  /* slot, quota, row + audit */
              {"lease", st->t_recorded, st->t_submitted}, /* credentials, spec, submit */
              {"setup", st->t_submitted, st->t_ready},    /* the launcher's sandbox */
              {"run", st->t_ready, st->t_result},         /* start record, program, teardown */
              {"start", st->t_ready, go},                 /* the start record (in run) */
              {"program", go, st->t_result},              /* go to result (in run) */
              {"record", st->t_result, now},              /* redaction, outcome + audit */
              {"total", st->r->line_us, now}};
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < TC_ARRAY_SIZE(ph) && k < n; i++) {
        if (!ph[i].from || !ph[i].to || ph[i].to < ph[i].from)
            continue;
        int w = snprintf(out + k, n - k, "%s%s;dur=%.3f", k ? ", " : "", ph[i].name,
                         (double)(ph[i].to - ph[i].from) / 1000.0);
        if (w < 0 || (size_t)w >= n - k)
            break;
        k += (size_t)w;
    }
}

static void exec_state_free(void *p)
{
    struct exec_state *st = p;
    if (!st)
        return;
    tc_exec_stream_free(st->stream); /* before the redactor it reads */
    json_decref(st->view);
    json_decref(st->findings);
    tc_redactor_free(st->redactor);
    tc_grant_free(st->grant);
    free(st);
}

static void hash_hex(const char *data, size_t len, char out[65])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)data, len, NULL, 0);
    sodium_bin2hex(out, 65, h, sizeof(h));
}

/* Give back a sandbox slot taken with tc_launcher_reserve() and not used. */
static void release_slot(struct tc_server *srv)
{
    if (tc_server_begin(srv)) {
        tc_launcher_unreserve(srv->launcher);
        tc_server_end(srv);
    }
}

/* ---- running: the recorder stores the start and the outcome, connected client or not ---- */

/* The API's Execution object of a launcher result (on a recorder thread). */
static json_t *build_view(void *userdata, json_t *result)
{
    struct exec_state *st = userdata;
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    struct tc_exec_filter filter = {.redactor = st->redactor};
    filter.secrets = tc_grant_values(st->grant, &filter.nsecrets);
    json_t *view = tc_exec_view(st->id, st->tool, result, st->limits, st->created_at, finished,
                                &filter, st->findings);
    if (view && !tc_grant_empty(st->grant))
        json_object_set_new(view, "credentials", tc_grant_summary(st->grant));
    return view;
}

/* Stored (or not yet): answer the client, if it is still there. An asynchronous call was
 * answered with 202 already: the state is its own, and ends here. */
static void on_recorded(void *userdata, int rc, json_t *view)
{
    struct exec_state *st = userdata;
    if (st->stream)
        tc_exec_stream_recorded(TC_STEAL(st->stream), rc, view);
    if (!st->r) {
        tc_log(rc == 0 || rc == -ESTALE ? TC_LOG_INFO : TC_LOG_WARN, "execution finished",
               "{s:s, s:s, s:s, s:O?, s:i}", "request_id", st->request_id, "execution_id", st->id,
               "tool", st->tool, "status", view ? json_object_get(view, "status") : NULL, "rc", rc);
        exec_state_free(st);
        return;
    }
    st->record_rc = rc;
    st->view = json_incref(view);
    tc_request_resume(st->r);
}

static void record_outcome(struct exec_state *st, json_t *result)
{
    json_t *actor = tc_auth_actor(&st->principal);
    struct tc_record_outcome o = {.ids = {.exec_id = st->id,
                                          .tenant_id = st->principal.tenant_id,
                                          .tool = st->tool,
                                          .request_id = st->request_id,
                                          .claimed_by = st->claimed_by,
                                          .actor = actor},
                                  .action = "execution.complete",
                                  .raw = result,
                                  .build = build_view,
                                  .done = on_recorded,
                                  .userdata = st,
                                  .release_credentials = !tc_grant_empty(st->grant)};
    if (!actor || tc_recorder_finish(st->srv->recorder, &o) < 0)
        on_recorded(st, -ENOMEM, NULL);
    json_decref(actor);
}

static void on_result_cb(void *userdata, json_t *result)
{
    ((struct exec_state *)userdata)->t_result = tc_now_us();
    record_outcome(userdata, result);
}

static void on_chunk_cb(void *userdata, int stream, const char *data, size_t len)
{
    struct exec_state *st = userdata;
    if (st->stream && stream == 3)
        tc_exec_stream_network(st->stream, data, len);
    else if (st->stream)
        tc_exec_stream_chunk(st->stream, stream, data, len);
}

/* The sandbox is set up: the recorder writes execution.start, then tells it to go. */
static void on_ready_cb(void *userdata, const char *id)
{
    struct exec_state *st = userdata;
    st->t_ready = tc_now_us();
    json_t *actor = tc_auth_actor(&st->principal);
    struct tc_record_ids ids = {.exec_id = st->id,
                                .tenant_id = st->principal.tenant_id,
                                .tool = st->tool,
                                .request_id = st->request_id,
                                .claimed_by = st->claimed_by,
                                .actor = actor};
    (void)id;
    (void)tc_recorder_start_run(st->srv->recorder, &ids);
    json_decref(actor);
}

/* ---- Idempotency-Key ---- */

enum idem { IDEM_NONE, IDEM_NEW, IDEM_DONE };

static bool idem_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x21 || k[i] > 0x7e)
            return false;
    return true;
}

/* A claim this old with neither an answer nor an execution is a dead request's: longer than
 * any request takes to its admission (the slot queue's 60 s at most, the database's 30 s
 * statement timeout, twice over). */
#define IDEM_STALE "5 minutes"

/* Claim the key for this request, or answer from the first one. IDEM_DONE: a response
 * was queued (*ret holds it). */
static enum idem idem_begin(struct tc_request *r, struct exec_state *st, enum MHD_Result *ret)
{
    const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (!key)
        return IDEM_NONE;
    if (!idem_key_ok(key)) {
        *ret = tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "Idempotency-Key must be 1 to 255 printable ASCII characters");
        return IDEM_DONE;
    }
    char hash[67];
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)r->body.data, r->body.len, NULL, 0);
    tc_db_bytea_hex(h, sizeof(h), hash);
    const char *p[] = {r->principal.tenant_id, key, hash};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    PGresult *res = NULL;
    bool claimed = false;
    if (c) {
        PQclear(tc_db_exec(c,
                           "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2"
                           " AND created_at < now() - interval '24 hours'",
                           2, p));
        res = tc_db_exec(c,
                         "INSERT INTO idempotency_keys (tenant_id, key, request_hash)"
                         " VALUES ($1, $2, $3::bytea) ON CONFLICT DO NOTHING",
                         3, p);
        claimed = res && strcmp(PQcmdTuples(res), "1") == 0;
        if (res && !claimed) {
            /* A claim without an answer nor an execution, older than any request takes to
             * reach its admission (IDEM_STALE): its request is gone (its process died, or it
             * could not release the key): taken over, as a fresh claim. */
            PQclear(res);
            res = tc_db_exec(c,
                             "UPDATE idempotency_keys SET created_at = now()"
                             " WHERE tenant_id = $1 AND key = $2 AND request_hash = $3::bytea"
                             " AND status IS NULL AND execution_id IS NULL"
                             " AND created_at < now() - interval '" IDEM_STALE "'",
                             3, p);
            claimed = res && strcmp(PQcmdTuples(res), "1") == 0;
        }
        PQclear(res);
        res = (!claimed && res) ? tc_db_exec(c,
                                             "SELECT request_hash = $3::bytea, status,"
                                             " response::text, location, execution_id::text"
                                             " FROM idempotency_keys"
                                             " WHERE tenant_id = $1 AND key = $2",
                                             3, p)
                                : NULL;
        tc_db_release(r->srv->db, c);
    }
    if (claimed) {
        snprintf(st->idem_key, sizeof(st->idem_key), "%s", key);
        return IDEM_NEW;
    }
    if (!res || PQntuples(res) != 1) {
        PQclear(res);
        *ret = tc_respond_db_down(r);
        return IDEM_DONE;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        *ret = tc_respond_problem(r, 422, "idempotency-key-reused", "Idempotency key reused", NULL,
                                  "this Idempotency-Key was used with a different request body");
    } else if (PQgetisnull(res, 0, 1) && !PQgetisnull(res, 0, 4)) {
        /* its execution is recorded: still running, or its answer was lost (the first
         * request's process died, or the database was away when it answered): never run
         * again; where to read it */
        char location[64];
        snprintf(location, sizeof(location), "/v1/executions/%s", PQgetvalue(res, 0, 4));
        *ret = tc_respond_problem_header(
            r, 409, "idempotency-in-progress", "Request in progress", "Location", location,
            "the first request with this Idempotency-Key recorded execution %s and has not "
            "answered; read it with GET %s",
            PQgetvalue(res, 0, 4), location);
    } else if (PQgetisnull(res, 0, 1)) {
        *ret = tc_respond_problem(r, 409, "idempotency-in-progress", "Request in progress", NULL,
                                  "the first request with this Idempotency-Key is still running");
    } else {
        unsigned status = (unsigned)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
        json_t *body = json_loads(PQgetvalue(res, 0, 2), 0, NULL);
        *ret = PQgetisnull(res, 0, 3) ? tc_respond_json(r, status, body)
                                      : tc_respond_json_ex(r, status, body, "application/json",
                                                           "Location", PQgetvalue(res, 0, 3));
    }
    PQclear(res);
    return IDEM_DONE;
}

/* Remember the response (status 200/202), or release the key so that a retry is evaluated
 * afresh (anything else). */
static void idem_end(struct tc_request *r, struct exec_state *st, unsigned status, json_t *body,
                     const char *location)
{
    if (!st || !st->idem_key[0])
        return;
    char code[8];
    snprintf(code, sizeof(code), "%u", status);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    const char *p[] = {r->principal.tenant_id, st->idem_key, code, text, location};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (c) {
        PQclear(text && (status == 200 || status == 202)
                    ? tc_db_exec(c,
                                 "UPDATE idempotency_keys SET status = $3::int,"
                                 " response = $4::jsonb, location = $5"
                                 " WHERE tenant_id = $1 AND key = $2",
                                 5, p)
                    : tc_db_exec(c,
                                 "DELETE FROM idempotency_keys WHERE tenant_id = $1"
                                 " AND key = $2",
                                 2, p));
        tc_db_release(r->srv->db, c);
    }
    free(text);
    st->idem_key[0] = '\0';
}

/* ---- recording ---- */

json_t *tc_api_execute_event(const struct tc_api_call_ids *ids, const struct tc_redactor *red,
                             json_t *body, const char *decision)
{
    json_t *code = json_object_get(body, "code"), *in = json_object_get(body, "stdin");
    /* The trail keeps code and stdin as redacted text plus a hash of the original. */
    struct tc_exec_filter filter = {.redactor = red};
    json_t *counts = json_object();
    json_t *code_r =
        tc_exec_redact_string(&filter, json_string_value(code), json_string_length(code), counts);
    json_t *in_r =
        in ? tc_exec_redact_string(&filter, json_string_value(in), json_string_length(in), counts)
           : json_null();
    char code_hash[65], stdin_hash[65] = "";
    hash_hex(json_string_value(code), json_string_length(code), code_hash);
    if (in)
        hash_hex(json_string_value(in), json_string_length(in), stdin_hash);
    json_t *files = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(body, "files"), i, f)
        json_array_append(files, json_object_get(f, "path"));
    json_t *ev =
        json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:{s:o, s:s, s:o, s:s*, s:o, s:o,"
                  " s:o}, s:O}",
                  "action", "execute", "tenant_id", ids->principal->tenant_id, "actor",
                  tc_auth_actor(ids->principal), "tool", ids->tool, "execution_id", ids->exec_id,
                  "request_id", ids->request_id, "decision", decision, "params", "code", code_r,
                  "code_hash", code_hash, "stdin", in_r, "stdin_hash", in ? stdin_hash : NULL,
                  "files", files, "limits", tc_exec_limits_json(ids->limits), "redactions", counts,
                  "findings", ids->findings ? ids->findings : json_null());
    /* only when asked for, so that records of calls without it keep their shape */
    json_t *collect = json_object_get(body, "collect");
    if (ev && collect)
        json_object_set(json_object_get(ev, "params"), "collect", collect);
    if (ev && ids->session_id)
        json_object_set_new(ev, "session_id", json_string(ids->session_id));
    /* the tool's definition the call was decided under (receipts name it) */
    if (ev && ids->tool_policy)
        json_object_set_new(ev, "tool_policy", json_string(ids->tool_policy));
    return ev;
}

static json_t *execute_event(struct tc_request *r, struct exec_state *st, json_t *body,
                             const char *decision)
{
    struct tc_api_call_ids ids = {.principal = &r->principal,
                                  .request_id = r->request_id,
                                  .tool = st->tool,
                                  .exec_id = st->id,
                                  .limits = st->limits,
                                  .findings = st->findings,
                                  .tool_policy = st->tool_policy[0] ? st->tool_policy : NULL};
    return tc_api_execute_event(&ids, st->redactor, body, decision);
}

/* The execution row (and, when held, its approval) commit together with the "execute" audit
 * record, before anything runs: no record, no run (fail closed). */
static int insert_execution(struct tc_request *r, struct exec_state *st, json_t *body,
                            json_t *approval /* NULL unless held */, char ret_expires[32],
                            struct tc_quota_refusal *ret_refusal)
{
    int quota_rc = 0;
    json_t *lj = tc_exec_limits_json(st->limits);
    char *req_text = json_dumps(body, JSON_COMPACT);
    char *limits_text = json_dumps(lj, JSON_COMPACT);
    json_decref(lj);
    json_t *event = execute_event(r, st, body, approval ? "held" : "allowed");
    char instance[16];
    snprintf(instance, sizeof(instance), "%d", st->claimed_by);
    const char *cb = json_string_value(json_object_get(body, "callback_url"));
    bool ok = false;
    PGconn *c =
        (req_text && limits_text && event) ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    if (!c)
        goto out;
    if (!tc_db_command(c, "BEGIN"))
        goto release;
    /* A call that runs now counts against its tenant's quota; a held one when it runs. */
    const struct tc_quota_defaults qd = tc_quota_defaults_of(r->srv->cfg);
    if (!approval && (quota_rc = tc_quota_admit_call_tx(
                          c, r->principal.tenant_id, r->principal.key_id, &qd, ret_refusal)) < 0) {
        (void)tc_db_command(c, "ROLLBACK");
        goto release;
    }
    const char *p[] = {st->id,
                       r->principal.tenant_id,
                       r->principal.key_id,
                       st->tool,
                       req_text,
                       r->request_id,
                       limits_text,
                       approval ? "pending_approval" : "running",
                       approval ? NULL : instance,
                       cb};
    /* (sent with the next statement: the audit head's read, most often) */
    ok = tc_db_send(
        c,
        "INSERT INTO executions (id, tenant_id, api_key_id, tool, status, request, request_id,"
        " created_at, started_at, limits, claimed_by, callback_url)"
        " VALUES ($1, $2, $3, $4, $8, $5::jsonb, $6, now(),"
        " CASE WHEN $9::int IS NULL THEN NULL ELSE now() END, $7::jsonb, $9::int, $10)",
        10, p);
    if (ok && approval) {
        ok = tc_approval_insert_tx(c, approval, r->principal.tenant_id, st->id, st->tool,
                                   r->principal.key_id, st->findings, r->srv->public_url,
                                   ret_expires) == 0;
        json_object_set(event, "approval_id", json_object_get(approval, "id"));
        json_object_set(event, "reasons", json_object_get(approval, "reasons"));
    }
    ok = ok && tc_audit_append_tx(c, r->srv->keys, event, NULL) == 0;
    if (ok && st->idem_key[0]) { /* a repeat of this request finds this execution */
        const char *k[] = {r->principal.tenant_id, st->idem_key, st->id};
        ok = tc_db_send(c,
                        "UPDATE idempotency_keys SET execution_id = $3"
                        " WHERE tenant_id = $1 AND key = $2",
                        3, k);
    }
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    if (!ok)
        tc_log(TC_LOG_ERROR, "recording the execution failed", "{s:s, s:s}", "request_id",
               r->request_id, "error", tc_db_error(c));
release:
    tc_db_release(r->srv->db, c);
out:
    json_decref(event);
    free(req_text);
    free(limits_text);
    return ok ? 0 : quota_rc == -EDQUOT ? -EDQUOT : -EIO;
}

static enum MHD_Result unavailable(struct tc_request *r, struct exec_state *st, const char *fmt,
                                   ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result unavailable(struct tc_request *r, struct exec_state *st, const char *fmt,
                                   ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    idem_end(r, st, 503, NULL, NULL);
    return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL, "%s", why);
}

static json_t *accepted_body(const struct exec_state *st);

static enum MHD_Result on_resumed(struct tc_request *r)
{
    struct exec_state *st = r->state;
    /* Fail closed: only a stored outcome is handed out. -ESTALE: another outcome was stored
     * first (this process had lost its claim); the client learns the stored one. */
    json_t *view = st->view;
    if ((st->record_rc == 0 || st->record_rc == -ESTALE) && view) {
        tc_log(TC_LOG_INFO, "execution finished", "{s:s, s:s, s:s, s:O, s:O, s:b}", "request_id",
               r->request_id, "execution_id", st->id, "tool", st->tool, "status",
               json_object_get(view, "status"), "duration_ms", json_object_get(view, "duration_ms"),
               "stored_first", st->record_rc == 0);
        st->view = NULL;
        idem_end(r, st, 200, view, NULL);
        char timing[384];
        server_timing(st, timing, sizeof(timing));
        return tc_respond_json_ex(r, 200, view, "application/json", "Server-Timing", timing);
    }
    /* The program ran (or may have): the key must not be released, or a retry would run it
     * again. A repeat is answered as an asynchronous call is: 202 and where to read it. */
    char location[64];
    snprintf(location, sizeof(location), "/v1/executions/%s", st->id);
    json_t *accepted = accepted_body(st);
    if (accepted) /* (else the claim stays, with its execution: a repeat is pointed at it) */
        idem_end(r, st, 202, accepted, location);
    json_decref(accepted);
    return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                              "the execution's outcome is not stored yet (it is kept and will"
                              " be); read it with GET %s",
                              location);
}

/* Lease what the tool's policy grants (after the execution is recorded, before it runs).
 * False: refused; the execution was recorded as refused and *ret answers. */
static bool lease_credentials(struct tc_request *r, struct exec_state *st,
                              const struct tc_tool *tool, json_t *spec, enum MHD_Result *ret)
{
    char *why = NULL;
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    int rc = c ? tc_broker_lease(c, r->srv->keys, r->principal.tenant_id, tool, st->id,
                                 st->limits[TC_LIMIT_TIMEOUT_MS], &st->grant, &why)
               : -EIO;
    if (rc == 0 && tc_grant_apply_spec(st->grant, spec) < 0) {
        (void)tc_broker_release(c, r->srv->keys, st->id);
        rc = -ENOMEM;
    }
    if (rc == 0) {
        tc_db_release(r->srv->db, c);
        return true;
    }
    /* Record the refusal (the execution row exists already), then answer. */
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    json_t *res = json_pack("{s:s, s:s}", "status", "error", "error",
                            why ? why : "the credentials could not be leased");
    struct tc_exec_filter filter = {.redactor = st->redactor};
    json_t *view = tc_exec_view(st->id, st->tool, res, st->limits, st->created_at, finished,
                                &filter, st->findings);
    json_t *actor = tc_auth_actor(&r->principal);
    struct tc_finish f = {.tenant_id = r->principal.tenant_id,
                          .exec_id = st->id,
                          .tool = st->tool,
                          .request_id = r->request_id,
                          .claimed_by = st->claimed_by,
                          .actor = actor,
                          .view = view,
                          .action = "execution.refused"};
    int frc = c && view ? tc_execution_finish(c, r->srv->keys, &f) : -EIO;
    tc_db_release(r->srv->db, c);
    if (frc < 0 && view) {
        /* The database went away meanwhile: the refusal is stored later, never left running. */
        struct tc_record_outcome o = {.ids = {.exec_id = st->id,
                                              .tenant_id = r->principal.tenant_id,
                                              .tool = st->tool,
                                              .request_id = r->request_id,
                                              .claimed_by = st->claimed_by,
                                              .actor = actor},
                                      .action = "execution.refused",
                                      .view = view,
                                      .release_credentials = true};
        if (tc_server_begin(r->srv)) { /* the recorder stops only after this section */
            (void)tc_recorder_finish(r->srv->recorder, &o);
            tc_server_end(r->srv);
        }
    }
    json_decref(actor);
    json_decref(view);
    json_decref(res);
    tc_log(TC_LOG_WARN, "execution refused: credentials unavailable", "{s:s, s:s, s:s}",
           "request_id", r->request_id, "execution_id", st->id, "reason",
           why ? why : "database error");
    if (rc == -EIO || rc == -ENOMEM || frc < 0) {
        free(why);
        *ret = unavailable(r, st, "the credentials of this tool could not be leased");
        return false;
    }
    idem_end(r, st, 422, NULL, NULL);
    *ret = tc_respond_problem(r, 422, "credential-unavailable", "Credential unavailable", NULL,
                              "%s", why ? why : "a credential is unavailable");
    free(why);
    return false;
}

/* The AcceptedExecution: the 202 of an asynchronous call, the "execution" event of a stream. */
static json_t *accepted_body(const struct exec_state *st)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", st->id, "tool", st->tool, "status",
                     "running", "created_at", st->created_at, "findings",
                     st->findings ? json_incref(st->findings) : json_array());
}

/* Hold the call: 202 with where to watch it. */
static enum MHD_Result hold(struct tc_request *r, struct exec_state *st, const struct tc_tool *tool,
                            const struct tc_exec_request *req, json_t *reasons, bool events)
{
    char approval_id[37] = "", expires[32] = "", location[64];
    snprintf(location, sizeof(location), "/v1/executions/%s", st->id);
    json_t *approval = tc_approval_new(tool, tc_approval_payload(tool, req, st->limits), reasons);
    if (approval)
        snprintf(approval_id, sizeof(approval_id), "%s",
                 json_string_value(json_object_get(approval, "id")));
    bool ok = approval && insert_execution(r, st, req->body, approval, expires, NULL) == 0;
    json_decref(approval);
    if (!ok) {
        tc_metrics_audit_failure();
        return unavailable(r, st, "the execution could not be recorded, so it was not held");
    }
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:O, s:s}", "id", st->id, "tool", st->tool,
                  "status", "pending_approval", "approval_id", approval_id, "expires_at", expires,
                  "reasons", reasons, "findings", st->findings, "created_at", st->created_at);
    tc_log(TC_LOG_INFO, "execution held for approval", "{s:s, s:s, s:s}", "request_id",
           r->request_id, "execution_id", st->id, "approval_id", approval_id);
    idem_end(r, st, 202, body, location);
    return tc_api_held_answer(r, st->id, body, events,
                              json_is_true(json_object_get(req->body, "cancel_on_disconnect")));
}

enum MHD_Result tc_api_held_answer(struct tc_request *r, const char *exec_id, json_t *body,
                                   bool events, bool cancel_gone)
{
    char location[64];
    snprintf(location, sizeof(location), "/v1/executions/%s", exec_id);
    /* Asked for events: "held", then the database is followed until the outcome (the run
     * happens later, maybe on another replica: its output comes through the database). */
    struct tc_events *e = NULL;
    if (events && body && tc_events_new(exec_id, 32u << 20, false, &e) == 0) {
        (void)tc_events_push(e, "held", NULL, body, true);
        if (tc_exec_stream_follow(e, r->srv->db, r->principal.tenant_id, exec_id,
                                  "pending_approval", 0, 0) < 0)
            tc_events_close(e);
        json_decref(body);
        enum MHD_Result ret = tc_exec_stream_respond(r, e, NULL, cancel_gone);
        tc_events_unref(e);
        return ret;
    }
    return tc_respond_json_ex(r, 202, body, "application/json", "Location", location);
}

/* Refused by the pre-screen: audited (fail closed), nothing stored or run, 403 with the findings.
 */
static enum MHD_Result block(struct tc_request *r, struct exec_state *st, json_t *body)
{
    json_t *event = execute_event(r, st, body, "blocked");
    PGconn *c = event ? tc_db_acquire(r->srv->db, TC_DB_WAIT_MS) : NULL;
    int rc = c ? tc_audit_append(c, r->srv->keys, event, NULL) : -EIO;
    tc_db_release(r->srv->db, c);
    json_decref(event);
    if (rc < 0) {
        tc_metrics_audit_failure();
        return unavailable(r, st, "the refusal could not be recorded");
    }
    tc_metrics_execution(st->tool, "blocked", 0);
    idem_end(r, st, 403, NULL, NULL);
    return tc_respond_problem(r, 403, "blocked-by-prescreen", "Blocked by pre-screen",
                              tc_api_findings_errors(st->findings, body),
                              "the code matched rules this tool blocks");
}

json_t *tc_api_findings_errors(json_t *findings, json_t *body)
{
    json_t *errors = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(findings, i, f)
    {
        /* code:LINE:COL, stdin:LINE:COL, files[N]:LINE:COL (N: the file's index in the request) */
        char path[96], where[32] = "code";
        const char *src = json_string_value(json_object_get(f, "source"));
        const char *fpath = json_string_value(json_object_get(f, "path"));
        if (src && strcmp(src, "stdin") == 0)
            snprintf(where, sizeof(where), "stdin");
        else if (src && strcmp(src, "file") == 0 && fpath) {
            size_t k;
            json_t *file;
            json_array_foreach(
                json_object_get(body, "files"), k,
                file) if (strcmp(json_string_value(json_object_get(file, "path")) ?: "", fpath) ==
                          0)
            {
                snprintf(where, sizeof(where), "files[%zu]", k);
                break;
            }
        }
        snprintf(path, sizeof(path), "%s:%lld:%lld", where,
                 (long long)json_integer_value(json_object_get(f, "line")),
                 (long long)json_integer_value(json_object_get(f, "column")));
        json_array_append_new(errors, json_pack("{s:s, s:O, s:O, s:O}", "path", path, "message",
                                                json_object_get(f, "message"), "rule",
                                                json_object_get(f, "rule"), "severity",
                                                json_object_get(f, "severity")));
    }
    return errors;
}

enum MHD_Result tc_api_execute(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    bool async = tc_request_prefers(r, "respond-async");
    return tc_api_execute_json(r, body,
                               &(struct tc_execute_opts){.async = async,
                                                         .idempotency = true,
                                                         .events = tc_stream_wanted(r),
                                                         .retry = tc_api_execute});
}

enum MHD_Result tc_api_execute_json(struct tc_request *r, json_t *body,
                                    const struct tc_execute_opts *opts)
{
    enum MHD_Result ret;
    if (!r->handler_us) /* (a call that waits for a slot runs this again) */
        r->handler_us = tc_now_us();
    if (r->srv->draining) { /* shutting down: another replica takes the call */
        json_decref(body);
        return tc_respond_problem_header(r, 503, "draining", "Service unavailable", "Connection",
                                         "close",
                                         "this server is shutting down; retry (elsewhere)");
    }
    struct tc_exec_request req = {0};
    json_t *errors = NULL, *spec = NULL, *reasons = NULL;
    if (tc_exec_request_parse(body, &req, &errors) < 0) {
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(body);

    struct tc_policy *policy = tc_server_policy(r->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, req.tool);
    struct exec_state *st = calloc(1, sizeof(*st));
    if (!st) {
        ret = MHD_NO;
        goto out;
    }
    st->r = r;
    st->srv = r->srv;
    st->t_begin = tc_now_us();
    st->principal = r->principal;
    snprintf(st->request_id, sizeof(st->request_id), "%s", r->request_id);
    bool async = opts->async || json_is_true(json_object_get(req.body, "async"));
    /* Only a stream of events notices its client leave (a waiting answer is suspended, and
     * libmicrohttpd does not watch a suspended connection) */
    bool cancel_gone = json_is_true(json_object_get(req.body, "cancel_on_disconnect"));
    if (cancel_gone && (!opts->events || async || opts->tap)) {
        ret =
            tc_respond_problem(r, 400, "validation", "Invalid request",
                               json_pack("[{s:s, s:s}]", "path", "cancel_on_disconnect", "message",
                                         "needs an answer streamed as events (Accept: "
                                         "text/event-stream), not async"),
                               "cancel_on_disconnect needs Accept: text/event-stream");
        goto out;
    }
    if (opts->idempotency && idem_begin(r, st, &ret) == IDEM_DONE)
        goto out;
    if (!tool) {
        idem_end(r, st, 404, NULL, NULL);
        ret = tc_respond_problem(r, 404, "unknown-tool", "Unknown tool", NULL,
                                 "no tool named '%s' is declared in the policy", req.tool);
        goto out;
    }
    if (tc_exec_limits(tool, &req, st->limits, &errors) < 0) {
        idem_end(r, st, 422, NULL, NULL);
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", errors,
                                 "a requested limit is above what the policy allows");
        goto out;
    }
    /* Refused now rather than failing later: a webhook to this host, to a cloud metadata
     * service or to the local network (server/webhook.h; checked again at every connect). */
    const char *cb = json_string_value(json_object_get(req.body, "callback_url"));
    char why[512];
    if (cb && tc_webhook_target_refused(cb, r->srv->cfg->webhook_allow_private, why, sizeof(why))) {
        idem_end(r, st, 422, NULL, NULL);
        ret = tc_respond_problem(r, 422, "callback-url-forbidden", "Callback URL not allowed",
                                 json_pack("[{s:s, s:s}]", "path", "callback_url", "message", why),
                                 "%s", why);
        goto out;
    }
    tc_uuid7(st->id);
    snprintf(st->tool, sizeof(st->tool), "%s", tool->name);
    tc_approval_tool_digest(tool, st->tool_policy);
    tc_iso8601(tc_wall_ms(), st->created_at);
    if (tc_exec_redactor(tool, r->srv->cfg->state_dir, &st->redactor) < 0) {
        ret = MHD_NO;
        goto out;
    }

    /* Pre-screen: advisory (the sandbox is the enforcement), but it can block or hold. Everything
     * that can run is screened: code, files, and stdin where it runs as a program. */
    if (tc_prescreen_request(tool, req.body, &st->findings) < 0) {
        ret = unavailable(r, st, "the pre-screen could not run, so the call was not run");
        goto out;
    }
    enum tc_prescreen_action action = tc_prescreen_decide(tool, st->findings);
    if (action == TC_ACTION_BLOCK) {
        ret = block(r, st, req.body);
        goto out;
    }

    st->t_screened = tc_now_us();
    if (tc_approval_needed(tool, action == TC_ACTION_APPROVE, &reasons)) {
        ret = hold(r, st, tool, &req, reasons, opts->events && !async);
        if (cancel_gone && opts->events && !async)
            tc_api_cancel_when_gone(r, st->id); /* the request for approval is withdrawn */
        goto out;
    }
    json_t *image = NULL;
    if (tc_exec_image(tool, r->srv->cfg->state_dir, &image) < 0) {
        idem_end(r, st, 503, NULL, NULL);
        ret = tc_respond_problem(r, 503, "image-unavailable", "Tool image unavailable", NULL,
                                 "the tool's image %s is not in this server's image store "
                                 "(toolcage images import)",
                                 tool->image);
        goto out;
    }
    spec = tc_exec_build_spec(tool, &req, st->limits, st->id, image);
    tc_exec_spec_tenant(spec, st->principal.tenant_id);
    json_decref(image);
    if (!spec) {
        ret = MHD_NO;
        goto out;
    }
    /* Refused before anything is recorded: no execution row, no audit record, no debris. */
    if (!r->srv->instance_locked) {
        ret = unavailable(r, st, "this server is reconnecting to its database");
        goto out;
    }
    /* A slot, or a place in the queue for one (server/slotq.h): while calls wait, a new one
     * queues behind them; one resumed for a free slot tries for it. */
    bool granted = r->slot_wait == TC_SLOT_GRANTED;
    int rr = -ESHUTDOWN;
    if ((!granted && r->slot_wait == TC_SLOT_NONE && opts->retry &&
         r->srv->cfg->queue_seconds > 0 && !tc_slotq_may_try()) ||
        r->slot_deadline_ms < 0) /* the queue was full: refused, not barging past it */
        rr = -EAGAIN;
    else if (tc_server_begin(r->srv)) {
        rr = tc_launcher_reserve(r->srv->launcher);
        tc_server_end(r->srv);
    }
    r->slot_wait = TC_SLOT_NONE;
    if (granted)
        tc_slotq_tried();
    if (rr == -EAGAIN) {
        idem_end(r, st, 503, NULL, NULL);
        int64_t now = tc_now_ms();
        bool full = r->slot_deadline_ms < 0;
        bool waited = r->slot_deadline_ms > 0;
        if (!waited && !full)
            r->slot_deadline_ms = now + r->srv->cfg->queue_seconds * 1000;
        if (!full && opts->retry && r->srv->cfg->queue_seconds > 0 && now < r->slot_deadline_ms &&
            tc_server_begin(r->srv)) {
            /* Suspended first: a slot may come free as soon as it is queued. Refused by a
             * full queue: it runs again at once and is refused. */
            tc_request_suspend(r, opts->retry);
            if (tc_slotq_add(r, r->principal.tenant_id, r->slot_deadline_ms, waited) < 0) {
                r->slot_deadline_ms = -1;
                r->slot_wait = TC_SLOT_WAITED;
                tc_request_resume(r);
            }
            tc_server_end(r->srv);
            ret = MHD_YES;
            goto out;
        }
        if (full)
            ret = tc_respond_problem(r, 503, "overloaded", "Too many sandboxes", NULL,
                                     "every sandbox slot is busy and the queue for one is full "
                                     "(%d calls per tenant, %d in all); retry later",
                                     TC_SLOTQ_PER_TENANT, TC_SLOTQ_MAX);
        else if (waited)
            ret = tc_respond_problem(r, 503, "overloaded", "Too many sandboxes", NULL,
                                     "every sandbox slot stayed busy while this call waited "
                                     "(TOOLCAGE_QUEUE_SECONDS); retry later");
        else
            ret = tc_respond_problem(r, 503, "overloaded", "Too many sandboxes", NULL,
                                     "every sandbox slot is busy; retry later");
        goto out;
    }
    if (rr < 0) {
        ret = unavailable(r, st, "the sandbox launcher is not available");
        goto out;
    }
    st->claimed_by = r->srv->instance_id;
    struct tc_quota_refusal quota = {0};
    int irc = insert_execution(r, st, req.body, NULL, NULL, &quota);
    if (irc == -EDQUOT) {
        release_slot(r->srv);
        idem_end(r, st, 429, NULL, NULL);
        tc_metrics_quota_rejection(r->principal.tenant_id, quota.limit);
        char retry[24];
        snprintf(retry, sizeof(retry), "%lld", (long long)quota.retry_after_s);
        if (strstr(quota.limit, "_seconds_per_day"))
            ret = tc_respond_problem_header(
                r, 429, "quota-exceeded", "Quota exceeded", "Retry-After", retry,
                "%s: tenant '%s' used %lld s of its %lld s in the last 24 hours (%s)", quota.limit,
                r->principal.tenant_name, (long long)quota.running, (long long)quota.value,
                quota.own ? "set for the tenant" : "the server's default");
        else if (strcmp(quota.limit, "max_concurrent") == 0)
            ret = tc_respond_problem_header(
                r, 429, "quota-exceeded", "Quota exceeded", "Retry-After", retry,
                "tenant '%s' has %lld executions running, its limit max_concurrent (%s)",
                r->principal.tenant_name, (long long)quota.running,
                quota.own ? "set for the tenant" : "the server's default");
        else
            ret = tc_respond_problem_header(
                r, 429, "quota-exceeded", "Quota exceeded", "Retry-After", retry,
                "%s: %lld calls per minute (%s); a call can start again in %lld s", quota.limit,
                (long long)quota.value,
                strcmp(quota.limit, "key_rate_per_minute") == 0 ? "for this API key"
                : quota.own                                     ? "set for the tenant"
                                                                : "the server's default",
                (long long)quota.retry_after_s);
        goto out;
    }
    if (irc < 0) {
        release_slot(r->srv);
        tc_metrics_audit_failure();
        ret = unavailable(r, st, "the execution could not be recorded, so it was not run");
        goto out;
    }
    st->t_recorded = tc_now_us();
    if (!lease_credentials(r, st, tool, spec, &ret)) {
        release_slot(r->srv);
        goto out;
    }
    /* Live events: asked for with Accept: text/event-stream or "stream": true (then another
     * connection can read them, GET /v1/executions/{id}/events). Without them (too many
     * streams open), the call is answered as it would be without. */
    if (opts->events || opts->tap || json_is_true(json_object_get(req.body, "stream"))) {
        size_t nsec = 0;
        const char *const *sec = tc_grant_values(st->grant, &nsec);
        if (tc_exec_stream_new(st->id, st->redactor, sec, nsec, st->limits[TC_LIMIT_OUTPUT_BYTES],
                               true, &st->stream) < 0)
            tc_log(TC_LOG_WARN, "no event stream for this execution", "{s:s, s:s}", "request_id",
                   r->request_id, "execution_id", st->id);
    }
    struct exec_state *s;
    char location[64];
    snprintf(location, sizeof(location), "/v1/executions/%s", st->id);
    if (opts->tap && !async && st->stream) {
        /* MCP: its own answer from the same events (api/mcp.c). */
        tc_exec_stream_tap(st->stream, opts->tap);
        json_t *accepted = accepted_body(st);
        if (accepted)
            tc_exec_stream_event(st->stream, "execution", accepted);
        json_decref(accepted);
        st->r = NULL;
        s = TC_STEAL(st);
        r->reply_filter = NULL;
        ret = opts->tap->answer(opts->tap->ud, r);
    } else if (opts->events && !async && st->stream) {
        /* Answered now with the stream; the state belongs to the run (as async). */
        struct tc_events *e = tc_exec_stream_events(st->stream);
        json_t *accepted = accepted_body(st);
        if (accepted)
            tc_exec_stream_event(st->stream, "execution", accepted);
        idem_end(r, st, 202, accepted, location);
        json_decref(accepted);
        st->r = NULL;
        s = TC_STEAL(st);
        ret = tc_exec_stream_respond(r, e, NULL, cancel_gone);
        if (cancel_gone)
            tc_api_cancel_when_gone(r, s->id);
    } else if (async) {
        /* Answered now; the state belongs to the run and ends in on_recorded(). Everything
         * about the answer is done before the submission: the run may finish at once. */
        json_t *accepted = accepted_body(st);
        /* only on this answer: a replayed or synchronous one did not apply it */
        r->preference_applied = opts->async ? "respond-async" : NULL;
        idem_end(r, st, 202, accepted, location);
        st->r = NULL;
        s = TC_STEAL(st);
        ret = tc_respond_json_ex(r, 202, accepted, "application/json", "Location", location);
    } else {
        r->state = TC_STEAL(st);
        r->state_free = exec_state_free;
        s = r->state;
        /* Suspend before submitting: the result may arrive before this function returns. */
        tc_request_suspend(r, on_resumed);
        ret = MHD_YES;
    }
    /* Held until the recorder has written execution.start (on_ready_cb). */
    json_object_set_new(spec, "hold", json_true());
    struct tc_launcher_job job = {.done = on_result_cb,
                                  .ready = on_ready_cb,
                                  .userdata = s,
                                  .reserved = true,
                                  .went_us = &s->t_go};
    if (s->stream) {
        json_object_set_new(spec, "stream", json_true());
        job.chunk = on_chunk_cb;
    }
    int src = -ESHUTDOWN;
    s->t_submitted = tc_now_us(); /* before: the sandbox may be ready before submit returns */
    if (tc_server_begin(r->srv)) {
        src = tc_launcher_submit_job(r->srv->launcher, spec, &job);
        tc_server_end(r->srv);
    }
    if (src < 0) {
        /* Nothing ran: that is the outcome, recorded like any other (then we answer). */
        json_t *res = json_pack("{s:s, s:s}", "status", "error", "error",
                                "the sandbox launcher is not available");
        record_outcome(s, res);
        json_decref(res);
    }
out:
    json_decref(spec);
    json_decref(reasons);
    exec_state_free(st);
    tc_policy_unref(policy);
    tc_exec_request_done(&req);
    return ret;
}

/* POST /v1/prescreen: the body of POST /v1/execute, validated by the same code (a tool name
 * with a NUL, or any other field /v1/execute refuses, is refused here too); the findings for
 * everything that would run and the action, without running or storing anything. */
enum MHD_Result tc_api_prescreen(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;
    struct tc_exec_request req = {0};
    json_t *errors = NULL;
    if (tc_exec_request_parse(body, &req, &errors) < 0) {
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(body);
    struct tc_policy *policy = tc_server_policy(r->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, req.tool);
    json_t *findings = NULL;
    if (!tool) {
        ret = tc_respond_problem(r, 404, "unknown-tool", "Unknown tool", NULL,
                                 "no tool named '%s' is declared in the policy", req.tool);
    } else if (tc_prescreen_request(tool, req.body, &findings) < 0) {
        ret = tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                 "the pre-screen could not run");
    } else {
        const char *action = tc_prescreen_action_name(tc_prescreen_decide(tool, findings));
        ret = tc_respond_json(r, 200,
                              json_pack("{s:s, s:o, s:s}", "tool", tool->name, "findings", findings,
                                        "action", action));
    }
    tc_policy_unref(policy);
    tc_exec_request_done(&req);
    return ret;
}
