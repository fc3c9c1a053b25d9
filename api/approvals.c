/* GET /v1/approvals, GET /v1/approvals/{id}, POST /v1/approvals/{id}/approve|deny
 * (reviewer, admin), POST /v1/executions/{id}/cancel (the requesting tenant). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "execution/cancel.h"
#include "server/auth.h"
#include "approval/approval.h"
#include "common/util.h"
#include "core/db.h"
#include "core/log.h"

static int atoi_safe(const char *s)
{
    int64_t v = 0;
    return tc_parse_i64(s, 0, INT32_MAX, &v) == 0 ? (int)v : 0;
}

static enum MHD_Result not_found(struct tc_request *r)
{
    return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such approval");
}

enum MHD_Result tc_api_approvals_list(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status"), *tool = tc_request_query(r, "tool");
    const char *cursor = tc_request_query(r, "cursor"), *ls = tc_request_query(r, "limit");
    static const char *const statuses[] = {"pending", "approved", "denied", "expired", "cancelled"};
    bool status_ok = !status;
    for (size_t i = 0; status && i < TC_ARRAY_SIZE(statuses); i++)
        status_ok |= strcmp(status, statuses[i]) == 0;
    int64_t limit = 50;
    if (!status_ok || (tool && (strlen(tool) > 64 || !tc_utf8_valid(tool, strlen(tool), false))) ||
        (cursor && !tc_uuid_valid(cursor)) || (ls && tc_parse_i64(ls, 1, 200, &limit) < 0))
        return tc_respond_problem(
            r, 400, "validation", "Invalid request", NULL,
            "status must be pending, approved, denied, expired or cancelled;"
            " tool at most 64 characters; cursor an approval id; limit 1..200");
    char lbuf[24];
    snprintf(lbuf, sizeof(lbuf), "%lld", (long long)limit + 1);
    const char *p[] = {r->principal.tenant_id, status, tool, cursor, lbuf};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    /* Oldest first (ids are time-ordered UUIDv7), so the queue reads in the order it filled. */
    PGresult *res = tc_db_exec(
        c,
        "SELECT a.id, a.execution_id, a.tool, a.tier, a.status, a.required_approvals,"
        " (SELECT count(*) FROM approval_decisions d WHERE d.approval_id = a.id"
        "  AND d.decision = 'approve'), jsonb_array_length(a.findings),"
        " coalesce(a.requester_key_id::text, ''), " TC_SQL_ISO("a.created_at") ", " TC_SQL_ISO(
            "a.expires_at") ","
                            " a.reasons::text"
                            " FROM approvals a WHERE a.tenant_id = $1 AND ($2::text IS NULL OR "
                            "a.status = $2)"
                            " AND ($3::text IS NULL OR a.tool = $3) AND ($4::uuid IS NULL OR a.id "
                            "> $4::uuid)"
                            " ORDER BY a.id LIMIT $5::int",
        5, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_db_down(r);
    json_t *items = json_array();
    int n = PQntuples(res);
    for (int i = 0; i < n && i < limit; i++)
        json_array_append_new(
            items,
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:o}", "id",
                      PQgetvalue(res, i, 0), "execution_id", PQgetvalue(res, i, 1), "tool",
                      PQgetvalue(res, i, 2), "tier", PQgetvalue(res, i, 3), "status",
                      PQgetvalue(res, i, 4), "required_approvals", atoi_safe(PQgetvalue(res, i, 5)),
                      "approvals", atoi_safe(PQgetvalue(res, i, 6)), "findings_count",
                      atoi_safe(PQgetvalue(res, i, 7)), "requester_key_id", PQgetvalue(res, i, 8),
                      "created_at", PQgetvalue(res, i, 9), "expires_at", PQgetvalue(res, i, 10),
                      "reasons", json_loads(PQgetvalue(res, i, 11), 0, NULL)));
    json_t *next = n > limit ? json_string(PQgetvalue(res, (int)limit - 1, 0)) : json_null();
    PQclear(res);
    return tc_respond_json(r, 200,
                           json_pack("{s:o, s:o}", "approvals", items, "next_cursor", next));
}

enum MHD_Result tc_api_approval_get(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return not_found(r);
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    int err = 0;
    json_t *o = tc_approval_get(c, r->principal.tenant_id, r->params[0], &err);
    tc_db_release(r->srv->db, c);
    if (!o)
        return err == -ENOENT ? not_found(r) : tc_respond_db_down(r);
    return tc_respond_json(r, 200, o);
}

static enum MHD_Result decide(struct tc_request *r, enum tc_decision d)
{
    if (!tc_uuid_valid(r->params[0]))
        return not_found(r);
    const char *reason = NULL;
    json_t *body = NULL;
    if (r->body.len > 0) {
        enum MHD_Result ret;
        body = tc_request_json(r, &ret);
        if (!body)
            return ret;
        const char *key;
        json_t *v;
        json_object_foreach(body, key, v)
        {
            if (strcmp(key, "reason") != 0) {
                /* key belongs to body: build the error before letting body go. */
                json_t *errors = json_pack("[{s:s, s:s}]", "path", key, "message", "unknown field");
                json_decref(body);
                return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                          "only \"reason\" may be given");
            }
        }
        json_t *rv = json_object_get(body, "reason");
        if (rv && (!json_is_string(rv) || json_string_length(rv) > 2000 ||
                   strlen(json_string_value(rv)) != json_string_length(rv))) {
            json_decref(body);
            return tc_respond_problem(r, 400, "validation", "Invalid request",
                                      json_pack("[{s:s, s:s}]", "path", "reason", "message",
                                                "must be a string of at most 2000 bytes"),
                                      "reason is invalid");
        }
        reason = json_string_value(rv);
    }
    if (d == TC_DECIDE_DENY && (!reason || !*reason)) {
        json_decref(body);
        return tc_respond_problem(
            r, 400, "validation", "Invalid request",
            json_pack("[{s:s, s:s}]", "path", "reason", "message", "is required to deny"),
            "a denial needs a reason");
    }
    char decider[48];
    snprintf(decider, sizeof(decider), "key:%s", r->principal.key_id);
    json_t *actor = json_pack("{s:s, s:s, s:s}", "type", "api_key", "id", r->principal.key_id,
                              "role", tc_role_name(r->principal.role));
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    struct tc_decide_result res;
    int rc =
        c ? tc_approval_decide(c, r->srv->keys, r->principal.tenant_id, r->params[0], decider,
                               r->principal.person_id, r->principal.key_id, actor, d, reason, &res)
          : -EIO;
    if (rc == -EIO && c)
        tc_log(TC_LOG_ERROR, "recording a decision failed", "{s:s, s:s}", "request_id",
               r->request_id, "error", tc_db_error(c));
    tc_db_release(r->srv->db, c);
    json_decref(actor);
    json_decref(body);
    switch (rc) {
    case 0:
        tc_log(TC_LOG_INFO, "approval decided", "{s:s, s:s, s:s, s:s}", "request_id", r->request_id,
               "approval_id", r->params[0], "decision", d == TC_DECIDE_APPROVE ? "approve" : "deny",
               "status", res.status);
        return tc_respond_json(r, 200,
                               json_pack("{s:s, s:s, s:s, s:i, s:i}", "id", r->params[0],
                                         "execution_id", res.execution_id, "status", res.status,
                                         "approvals", res.approvals, "required_approvals",
                                         res.required));
    case -ENOENT:
        return not_found(r);
    case -EPERM:
        return tc_respond_problem(r, 403, "maker-checker", "Forbidden", NULL,
                                  "the key (or person) that asked for this call cannot decide it");
    case -EALREADY:
        return tc_respond_problem(r, 409, "already-decided", "Conflict", NULL,
                                  "this key, or the person it belongs to, has already decided"
                                  " this approval");
    case -ESTALE:
        return tc_respond_problem(
            r, 409, "not-pending", "Conflict", NULL,
            "the approval is no longer pending (decided, expired or cancelled)");
    default:
        return tc_respond_db_down(r);
    }
}

enum MHD_Result tc_api_approval_approve(struct tc_request *r)
{
    return decide(r, TC_DECIDE_APPROVE);
}
enum MHD_Result tc_api_approval_deny(struct tc_request *r)
{
    return decide(r, TC_DECIDE_DENY);
}

int tc_api_cancel(struct tc_server *srv, const struct tc_principal *p, const char *exec_id)
{
    json_t *actor = tc_auth_actor(p);
    PGconn *c = tc_db_acquire(srv->db, TC_DB_WAIT_MS);
    /* Held: withdrawn. Otherwise queued (approved, not claimed yet): closed; running: killed. */
    int rc = c && actor ? tc_approval_cancel(c, srv->keys, p->tenant_id, exec_id, actor) : -EIO;
    if (rc == -ESTALE)
        rc = tc_execution_cancel(c, srv->keys, p->tenant_id, exec_id, actor);
    tc_db_release(srv->db, c);
    json_decref(actor);
    return rc;
}

struct gone {
    struct tc_principal principal;
    char exec_id[37];
};

static void cancel_gone(struct tc_request *r, void *ud)
{
    struct gone *g = ud;
    int rc = tc_api_cancel(r->srv, &g->principal, g->exec_id);
    tc_log(TC_LOG_INFO, "the client left: its call is cancelled, as it asked", "{s:s, s:s, s:i}",
           "request_id", r->request_id, "execution_id", g->exec_id, "result", rc);
}

void tc_api_cancel_when_gone(struct tc_request *r, const char *exec_id)
{
    struct gone *g = calloc(1, sizeof(*g));
    if (!g)
        return; /* then it runs on, as without the request */
    g->principal = r->principal;
    snprintf(g->exec_id, sizeof(g->exec_id), "%s", exec_id);
    free(r->gone_ud);
    r->gone_ud = g;
    r->on_gone = cancel_gone;
}

enum MHD_Result tc_api_execution_cancel(struct tc_request *r)
{
    if (!tc_uuid_valid(r->params[0]))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    int rc = tc_api_cancel(r->srv, &r->principal, r->params[0]);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL,
                                  "no execution of this tenant has this id");
    if (rc == -ESTALE)
        return tc_respond_problem(r, 409, "not-pending", "Conflict", NULL,
                                  "the execution has finished already");
    if (rc < 0)
        return tc_respond_db_down(r);
    if (rc == TC_CANCEL_REQUESTED) {
        /* the sandbox is being killed; GET the execution (?wait=) for its outcome */
        char loc[64];
        snprintf(loc, sizeof(loc), "/v1/executions/%s", r->params[0]);
        return tc_respond_json_ex(
            r, 202, json_pack("{s:s, s:s}", "id", r->params[0], "status", "cancelling"),
            "application/json", "Location", loc);
    }
    return tc_respond_json(r, 200,
                           json_pack("{s:s, s:s}", "id", r->params[0], "status", "cancelled"));
}
