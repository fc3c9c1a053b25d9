/* GET /v1/executions/{id}[?wait=SECONDS]: the stored execution of the caller's tenant; with
 * wait, a long-poll that holds no thread until the execution finishes or the time is up.
 * GET /v1/executions: the tenant's executions, newest first, a page at a time. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "common/util.h"
#include "core/db.h"
#include "server/waiters.h"

#define MAX_WAIT_SECONDS 60

static bool terminal(const char *status)
{
    static const char *const open[] = {"pending_approval", "queued", "running"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(open); i++)
        if (strcmp(status, open[i]) == 0)
            return false;
    return true;
}

bool tc_api_execution_terminal(const char *status)
{
    return status && terminal(status);
}

static int load(struct tc_request *r, const char *id, json_t **ret_view)
{
    return tc_api_execution_load(r->srv->db, r->principal.tenant_id, id, ret_view);
}

int tc_api_execution_load(struct tc_db *db, const char *tenant_id, const char *id,
                          json_t **ret_view)
{
    PGconn *c = tc_db_acquire(db, TC_DB_WAIT_MS);
    if (!c)
        return -EIO;
    const char *p[] = {id, tenant_id};
    /* The tenant filter is part of the lookup: another tenant's id is simply not found. */
    PGresult *res = tc_db_exec(
        c,
        "SELECT e.result::text, e.tool, e.status,"
        " " TC_SQL_ISO(
            "e.created_at") ", e.limits::text,"
                            " " TC_SQL_ISO(
                                "e.finished_at") ", a.id, a.status,"
                                                 " " TC_SQL_ISO(
                                                     "a.expires_at") ","
                                                                     " e.code_started_at IS NOT "
                                                                     "NULL, e.needs_review, "
                                                                     "e.late_result::text"
                                                                     " FROM executions e LEFT JOIN "
                                                                     "approvals a ON "
                                                                     "a.execution_id = e.id"
                                                                     " WHERE e.id = $1 AND "
                                                                     "e.tenant_id = $2",
        2, p);
    tc_db_release(db, c);
    if (!res)
        return -EIO;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return -ENOENT;
    }
    json_t *view;
    if (!PQgetisnull(res, 0, 0)) {
        view = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    } else {
        /* Not run (yet): held, queued, running, or closed without running (denied, ...). */
        view = json_pack("{s:s, s:s, s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:i, s:i, s:i, s:n,"
                         " s:o, s:{}, s:[], s:n, s:s, s:n}",
                         "id", id, "tool", PQgetvalue(res, 0, 1), "status", PQgetvalue(res, 0, 2),
                         "exit_code", "signal", "stdout", "", "stderr", "", "stdout_truncated", 0,
                         "stderr_truncated", 0, "duration_ms", 0, "cpu_ms", 0, "memory_peak_bytes",
                         0, "killed_reason", "limits", json_loads(PQgetvalue(res, 0, 4), 0, NULL),
                         "enforced", "policy_violations", "error", "created_at",
                         PQgetvalue(res, 0, 3), "finished_at");
        if (view) {
            json_object_set_new(view, "files", json_array());
            json_object_set_new(view, "files_truncated", json_false());
            json_object_set_new(view, "pids_limit_hit", json_false());
            json_object_set_new(view, "workspace_full", json_false());
        }
        if (view && !PQgetisnull(res, 0, 5))
            json_object_set_new(view, "finished_at", json_string(PQgetvalue(res, 0, 5)));
    }
    if (view && PQgetisnull(res, 0, 0)) /* not finished (or never run): the row says */
        json_object_set_new(view, "started", json_boolean(strcmp(PQgetvalue(res, 0, 9), "t") == 0));
    if (view && strcmp(PQgetvalue(res, 0, 10), "t") == 0) /* set after the outcome, too */
        json_object_set_new(view, "needs_review", json_true());
    if (view && !PQgetisnull(res, 0, 11)) {
        json_t *late = json_loads(PQgetvalue(res, 0, 11), 0, NULL);
        if (late)
            json_object_set_new(view, "late_result", late);
    }
    if (view && !PQgetisnull(res, 0, 6)) {
        json_object_set_new(view, "approval_id", json_string(PQgetvalue(res, 0, 6)));
        json_object_set_new(view, "approval_status", json_string(PQgetvalue(res, 0, 7)));
        json_object_set_new(view, "expires_at", json_string(PQgetvalue(res, 0, 8)));
    }
    PQclear(res);
    if (!view)
        return -EIO;
    *ret_view = view;
    return 0;
}

static enum MHD_Result respond(struct tc_request *r)
{
    json_t *view = NULL;
    int rc = load(r, r->params[0], &view);
    if (rc == -ENOENT)
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    if (rc < 0)
        return tc_respond_db_down(r);
    return tc_respond_json(r, 200, view);
}

enum MHD_Result tc_api_execution_get(struct tc_request *r)
{
    const char *ws = tc_request_query(r, "wait");
    int64_t wait = 0;
    if (tc_uuid_valid(r->params[0]) && ws && tc_parse_i64(ws, 0, MAX_WAIT_SECONDS, &wait) < 0)
        return tc_respond_problem(r, 400, "validation", "Invalid request", NULL,
                                  "wait must be an integer number of seconds from 0 to %d",
                                  MAX_WAIT_SECONDS);
    return tc_api_execution_wait(r, wait);
}

enum MHD_Result tc_api_execution_wait(struct tc_request *r, int64_t wait)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    if (wait <= 0)
        return respond(r);
    if (wait > MAX_WAIT_SECONDS)
        wait = MAX_WAIT_SECONDS;

    json_t *view = NULL;
    int rc = load(r, id, &view);
    if (rc < 0 || terminal(json_string_value(json_object_get(view, "status")))) {
        json_decref(view);
        return respond(r);
    }
    json_decref(view);
    /* Suspend first (a waker may resume us as soon as we are registered), register, then
     * look again: a finish between the first look and the registration would be missed. */
    if (!tc_server_begin(r->srv)) /* shutting down: answer now rather than park */
        return respond(r);
    tc_request_suspend(r, respond);
    int added = tc_waiter_add(id, r, tc_now_ms() + wait * 1000);
    tc_server_end(r->srv);
    if (added < 0) {
        tc_request_resume(r);
        return MHD_YES;
    }
    rc = load(r, id, &view);
    bool done = rc < 0 || terminal(json_string_value(json_object_get(view, "status")));
    json_decref(view);
    if (done && tc_waiter_remove(r))
        tc_request_resume(r);
    return MHD_YES;
}

/* ---- the list ---- */

#define LIST_DEFAULT 20
#define LIST_MAX     100

static bool status_known(const char *s)
{
    static const char *const all[] = {"pending_approval", "queued",  "running",  "completed",
                                      "failed",           "timeout", "killed",   "error",
                                      "denied",           "expired", "cancelled"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(all); i++)
        if (strcmp(s, all[i]) == 0)
            return true;
    return false;
}

static json_t *text_or_null(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? json_null() : json_string(PQgetvalue(res, row, col));
}

enum MHD_Result tc_api_executions_list(struct tc_request *r)
{
    const char *status = tc_request_query(r, "status"), *tool = tc_request_query(r, "tool");
    const char *since = tc_request_query(r, "since"), *cursor = tc_request_query(r, "cursor");
    const char *ls = tc_request_query(r, "limit");
    int64_t limit = LIST_DEFAULT, since_ms = 0;
    json_t *errors = json_array();
    if (status && !status_known(status))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "status", "message",
                                                "must be an execution status"));
    if (tool && (!*tool || strlen(tool) > 64 || !tc_utf8_valid(tool, strlen(tool), false)))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "tool", "message",
                                                "must be 1 to 64 characters"));
    if (since && tc_parse_iso_utc(since, &since_ms) < 0)
        json_array_append_new(
            errors,
            json_pack("{s:s, s:s}", "path", "since", "message",
                      "must be a UTC date or time: YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.mmm]Z"));
    if (cursor && !tc_uuid_valid(cursor))
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "cursor", "message",
                                                "must be the next_cursor of an earlier page"));
    if (ls && tc_parse_i64(ls, 1, LIST_MAX, &limit) < 0)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "limit", "message",
                                                "must be an integer from 1 to 100"));
    if (json_array_size(errors) > 0)
        return tc_respond_problem(r, 400, "validation", "Invalid request", errors,
                                  "a query parameter is not valid (see errors)");
    json_decref(errors);

    char lbuf[24], sbuf[24];
    snprintf(lbuf, sizeof(lbuf), "%lld", (long long)limit + 1);
    snprintf(sbuf, sizeof(sbuf), "%lld", (long long)since_ms);
    const char *p[] = {r->principal.tenant_id, status, tool, since ? sbuf : NULL, cursor, lbuf};
    PGconn *c = tc_db_acquire(r->srv->db, TC_DB_WAIT_MS);
    if (!c)
        return tc_respond_db_down(r);
    /* Newest first: ids are time-ordered UUIDv7, so the cursor (the last id of a page) is a
     * stable position, and executions created meanwhile never shift a page. The tenant is
     * part of every lookup. */
    PGresult *res = tc_db_exec(
        c,
        "SELECT e.id, e.tool, e.status, " TC_SQL_ISO(
            "e.created_at") ","
                            " " TC_SQL_ISO(
                                "e.finished_at") ", e.result->'exit_code', a.id, a.status"
                                                 " FROM executions e LEFT JOIN approvals a ON "
                                                 "a.execution_id = e.id"
                                                 " WHERE e.tenant_id = $1 AND ($2::text IS NULL OR "
                                                 "e.status = $2)"
                                                 " AND ($3::text IS NULL OR e.tool = $3)"
                                                 " AND ($4::bigint IS NULL OR e.created_at >= "
                                                 "to_timestamp($4::bigint / 1000.0))"
                                                 " AND ($5::uuid IS NULL OR e.id < $5::uuid)"
                                                 " ORDER BY e.id DESC LIMIT $6::int",
        6, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_db_down(r);
    json_t *items = json_array();
    int n = PQntuples(res);
    for (int i = 0; i < n && i < limit; i++) {
        json_t *exit_code = PQgetisnull(res, i, 5)
                                ? NULL
                                : json_loads(PQgetvalue(res, i, 5), JSON_DECODE_ANY, NULL);
        json_array_append_new(
            items,
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", PQgetvalue(res, i, 0),
                      "tool", PQgetvalue(res, i, 1), "status", PQgetvalue(res, i, 2), "created_at",
                      PQgetvalue(res, i, 3), "finished_at", text_or_null(res, i, 4), "exit_code",
                      exit_code ? exit_code : json_null(), "approval_id", text_or_null(res, i, 6),
                      "approval_status", text_or_null(res, i, 7)));
    }
    json_t *next = n > limit ? json_string(PQgetvalue(res, (int)limit - 1, 0)) : json_null();
    PQclear(res);
    return tc_respond_json(r, 200,
                           json_pack("{s:o, s:o}", "executions", items, "next_cursor", next));
}
