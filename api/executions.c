#include <string.h>

#include "api/api.h"
#include "common/util.h"
#include "server/db.h"

enum MHD_Result tc_api_execution_get(struct tc_request *r)
{
    const char *id = r->params[0];
    if (!tc_uuid_valid(id))
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    PGconn *c = tc_db_acquire(r->srv->db, 5000);
    if (!c)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the database is not reachable");
    const char *p[] = {id, r->principal.tenant_id};
    /* The tenant filter is part of the lookup: another tenant's id is simply not found. */
    PGresult *res = tc_db_exec(c,
        "SELECT result, tool, status,"
        " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
        " limits"
        " FROM executions WHERE id = $1 AND tenant_id = $2", 2, p);
    tc_db_release(r->srv->db, c);
    if (!res)
        return tc_respond_problem(r, 503, "unavailable", "Service unavailable", NULL,
                                  "the database is not reachable");
    if (PQntuples(res) != 1) {
        PQclear(res);
        return tc_respond_problem(r, 404, "not-found", "Not found", NULL, "no such execution");
    }
    json_t *view;
    if (!PQgetisnull(res, 0, 0)) {
        view = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
    } else {
        /* Not finished yet. */
        view = json_pack("{s:s, s:s, s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:i, s:i, s:i, s:n,"
                         " s:o, s:{}, s:[], s:n, s:s, s:n}",
                         "id", id, "tool", PQgetvalue(res, 0, 1), "status", PQgetvalue(res, 0, 2),
                         "exit_code", "signal", "stdout", "", "stderr", "", "stdout_truncated", 0,
                         "stderr_truncated", 0, "duration_ms", 0, "cpu_ms", 0,
                         "memory_peak_bytes", 0, "killed_reason", "limits",
                         json_loads(PQgetvalue(res, 0, 4), 0, NULL), "enforced",
                         "policy_violations", "error", "created_at", PQgetvalue(res, 0, 3),
                         "finished_at");
    }
    PQclear(res);
    if (!view)
        return tc_respond_problem(r, 500, "internal", "Internal error", NULL,
                                  "the stored execution could not be read");
    return tc_respond_json(r, 200, view);
}
