/* POST /v1/execute: validate, apply the tool's policy, store, run in the launcher
 * without holding a worker thread, store the result, answer. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/exec.h"
#include "audit/audit.h"
#include "common/util.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "server/db.h"
#include "server/log.h"
#include "server/metrics.h"

struct exec_state {
    struct tc_request *r;
    char id[37];
    char tool[65];
    char created_at[32];
    int64_t limits[TC_LIMIT__COUNT];
    int submit_rc;
    json_t *result; /* written by the launcher's reader thread before it resumes us */
};

static void exec_state_free(void *p)
{
    struct exec_state *st = p;
    if (!st)
        return;
    json_decref(st->result);
    free(st);
}

static void on_result(void *userdata, json_t *result)
{
    struct exec_state *st = userdata;
    st->result = json_incref(result);
    tc_request_resume(st->r);
}

static json_t *actor_of(struct tc_request *r)
{
    return json_pack("{s:s, s:s, s:s}", "type", "api_key", "id", r->principal.key_id, "role",
                     tc_role_name(r->principal.role));
}

/* One statement and one audit record in a single transaction: both or neither. */
static bool db_tx_with_audit(struct tc_request *r, const char *sql, int nparams,
                             const char *const *params, json_t *event)
{
    PGconn *c = tc_db_acquire(r->srv->db, 5000);
    if (!c)
        return false;
    bool ok = false;
    PGresult *res = tc_db_exec(c, "BEGIN", 0, NULL);
    if (res) {
        PQclear(res);
        res = tc_db_exec(c, sql, nparams, params);
        ok = res && strcmp(PQcmdTuples(res), "1") == 0 &&
             tc_audit_append_tx(c, r->srv->keys, event, NULL) == 0;
        PQclear(res);
        res = tc_db_exec(c, ok ? "COMMIT" : "ROLLBACK", 0, NULL);
        ok = ok && res;
        PQclear(res);
    }
    if (!ok)
        tc_log(TC_LOG_ERROR, "database write failed", "{s:s, s:s}", "request_id", r->request_id,
               "error", PQerrorMessage(c));
    tc_db_release(r->srv->db, c);
    return ok;
}

static bool store_result(struct tc_request *r, struct exec_state *st, json_t *view)
{
    char *text = json_dumps(view, JSON_COMPACT);
    if (!text)
        return false;
    const char *p[] = {st->id, r->principal.tenant_id, json_string_value(json_object_get(view, "status")),
                       text, json_string_value(json_object_get(view, "finished_at"))};
    json_t *event = json_pack(
        "{s:s, s:s, s:o, s:s, s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:O, s:O}",
        "action", "execution.complete", "tenant_id", r->principal.tenant_id, "actor", actor_of(r),
        "tool", st->tool, "execution_id", st->id, "request_id", r->request_id,
        "status", json_object_get(view, "status"), "exit_code", json_object_get(view, "exit_code"),
        "killed_reason", json_object_get(view, "killed_reason"),
        "duration_ms", json_object_get(view, "duration_ms"), "cpu_ms", json_object_get(view, "cpu_ms"),
        "memory_peak_bytes", json_object_get(view, "memory_peak_bytes"),
        "output_bytes", (json_int_t)(strlen(json_string_value(json_object_get(view, "stdout"))) +
                                     strlen(json_string_value(json_object_get(view, "stderr")))),
        "policy_violations", json_object_get(view, "policy_violations"),
        "enforced", json_object_get(view, "enforced"));
    bool ok = event && db_tx_with_audit(r, "UPDATE executions SET status = $3, result = $4::jsonb,"
                                           " finished_at = $5 WHERE id = $1 AND tenant_id = $2",
                                        5, p, event);
    json_decref(event);
    free(text);
    return ok;
}

static enum MHD_Result on_resumed(struct tc_request *r)
{
    struct exec_state *st = r->state;
    if (st->submit_rc == -EAGAIN)
        return tc_respond_problem(r, 503, "overloaded", "Too many sandboxes", NULL,
                                  "every sandbox slot is busy; retry later");
    if (st->submit_rc < 0)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the sandbox launcher is not available");
    char finished[32];
    tc_iso8601(tc_wall_ms(), finished);
    json_t *view = tc_exec_view(st->id, st->tool, st->result, st->limits, st->created_at, finished);
    if (!view)
        return MHD_NO;
    tc_metrics_execution(st->tool, json_string_value(json_object_get(view, "status")),
                         json_integer_value(json_object_get(view, "duration_ms")));
    /* Fail closed: a result that could not be recorded is not handed out. */
    if (!store_result(r, st, view)) {
        tc_metrics_audit_failure();
        json_decref(view);
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the execution ran but its result could not be recorded");
    }
    tc_log(TC_LOG_INFO, "execution finished", "{s:s, s:s, s:s, s:O, s:O}", "request_id",
           r->request_id, "execution_id", st->id, "tool", st->tool, "status",
           json_object_get(view, "status"), "duration_ms", json_object_get(view, "duration_ms"));
    return tc_respond_json(r, 200, view);
}

static void hash_hex(const char *data, size_t len, char out[65])
{
    unsigned char h[32];
    crypto_generichash(h, sizeof(h), (const unsigned char *)data, len, NULL, 0);
    sodium_bin2hex(out, 65, h, sizeof(h));
}

/* The execution row and its "execute" audit record commit together, before anything runs:
 * no record, no run (fail closed). */
static enum MHD_Result insert_execution(struct tc_request *r, struct exec_state *st, json_t *body,
                                        bool *ret_ok)
{
    json_t *lj = tc_exec_limits_json(st->limits);
    char *req_text = json_dumps(body, JSON_COMPACT);
    char *limits_text = json_dumps(lj, JSON_COMPACT);
    *ret_ok = false;
    json_t *code = json_object_get(body, "code"), *in = json_object_get(body, "stdin");
    char code_hash[65], stdin_hash[65] = "";
    hash_hex(json_string_value(code), json_string_length(code), code_hash);
    if (in)
        hash_hex(json_string_value(in), json_string_length(in), stdin_hash);
    json_t *files = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(body, "files"), i, f)
        json_array_append(files, json_object_get(f, "path"));
    json_t *event = json_pack(
        "{s:s, s:s, s:o, s:s, s:s, s:s, s:s, s:{s:O, s:s, s:O, s:s*, s:o, s:o}}",
        "action", "execute", "tenant_id", r->principal.tenant_id, "actor", actor_of(r),
        "tool", st->tool, "execution_id", st->id, "request_id", r->request_id, "decision",
        "allowed", "params", "code", code, "code_hash", code_hash, "stdin", in ? in : json_null(),
        "stdin_hash", in ? stdin_hash : NULL, "files", files, "limits", lj);
    if (req_text && limits_text && event) {
        const char *p[] = {st->id, r->principal.tenant_id, r->principal.key_id, st->tool, req_text,
                           r->request_id, st->created_at, limits_text};
        *ret_ok = db_tx_with_audit(
            r,
            "INSERT INTO executions (id, tenant_id, api_key_id, tool, status, request,"
            " request_id, created_at, started_at, limits)"
            " VALUES ($1, $2, $3, $4, 'running', $5::jsonb, $6, $7, now(), $8::jsonb)",
            8, p, event);
    }
    json_decref(event);
    free(req_text);
    free(limits_text);
    if (!*ret_ok) {
        tc_metrics_audit_failure();
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the execution could not be recorded, so it was not run");
    }
    return MHD_YES;
}

enum MHD_Result tc_api_execute(struct tc_request *r)
{
    enum MHD_Result ret;
    json_t *body = tc_request_json(r, &ret);
    if (!body)
        return ret;

    struct tc_exec_request req;
    json_t *errors = NULL;
    if (tc_exec_request_parse(body, &req, &errors) < 0) {
        json_decref(body);
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "the request does not match the schema (see errors)");
    }
    json_decref(body);

    struct tc_policy *policy = tc_server_policy(r->srv);
    const struct tc_tool *tool = tc_policy_tool(policy, req.tool);
    json_t *spec = NULL;
    struct exec_state *st = NULL;
    if (!tool) {
        ret = tc_respond_problem(r, 404, "unknown-tool", "Unknown tool", NULL,
                                 "no tool named '%s' is declared in the policy", req.tool);
        goto out;
    }
    st = calloc(1, sizeof(*st));
    if (!st) {
        ret = MHD_NO;
        goto out;
    }
    st->r = r;
    if (tc_exec_limits(tool, &req, st->limits, &errors) < 0) {
        ret = tc_respond_problem(r, 422, "limit-exceeds-policy", "Limit exceeds policy", errors,
                                 "a requested limit is above what the policy allows");
        goto out;
    }
    tc_uuid7(st->id);
    snprintf(st->tool, sizeof(st->tool), "%s", tool->name);
    tc_iso8601(tc_wall_ms(), st->created_at);
    spec = tc_exec_build_spec(tool, &req, st->limits, st->id);
    if (!spec) {
        ret = MHD_NO;
        goto out;
    }
    bool stored;
    ret = insert_execution(r, st, req.body, &stored);
    if (!stored)
        goto out;

    r->state = TC_STEAL(st);
    r->state_free = exec_state_free;
    struct exec_state *s = r->state;
    /* Suspend before submitting: the result may arrive before this function returns. */
    tc_request_suspend(r, on_resumed);
    s->submit_rc = tc_launcher_submit(r->srv->launcher, spec, on_result, s);
    if (s->submit_rc < 0)
        tc_request_resume(r);
    ret = MHD_YES;
out:
    json_decref(spec);
    exec_state_free(st);
    tc_policy_unref(policy);
    tc_exec_request_done(&req);
    return ret;
}
