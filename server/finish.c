#include "server/finish.h"

#include <errno.h>
#include <string.h>

#include "audit/audit.h"
#include "common/util.h"
#include "server/db.h"

static bool run(PGconn *c, const char *sql, int n, const char *const *p, bool want_one_row)
{
    PGresult *r = tc_db_exec(c, sql, n, p);
    bool ok = r && (!want_one_row || strcmp(PQcmdTuples(r), "1") == 0);
    PQclear(r);
    return ok;
}

int tc_execution_finish(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        json_t *actor, const char *tool, const char *exec_id,
                        const char *request_id, json_t *view, const char *action)
{
    char *text = json_dumps(view, JSON_COMPACT);
    const char *out = json_string_value(json_object_get(view, "stdout"));
    const char *err = json_string_value(json_object_get(view, "stderr"));
    json_t *ev = json_pack(
        "{s:s, s:s, s:O, s:s, s:s, s:s*, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:O, s:O, s:O}",
        "action", action, "tenant_id", tenant_id, "actor", actor, "tool", tool, "execution_id",
        exec_id, "request_id", request_id, "status", json_object_get(view, "status"), "exit_code",
        json_object_get(view, "exit_code"), "killed_reason", json_object_get(view, "killed_reason"),
        "duration_ms", json_object_get(view, "duration_ms"), "cpu_ms",
        json_object_get(view, "cpu_ms"), "memory_peak_bytes",
        json_object_get(view, "memory_peak_bytes"), "output_bytes",
        (json_int_t)((out ? strlen(out) : 0) + (err ? strlen(err) : 0)), "policy_violations",
        json_object_get(view, "policy_violations"), "enforced", json_object_get(view, "enforced"),
        "error", json_object_get(view, "error"));
    /* what the sandbox reached for, what the pre-screen saw, and what was scrubbed */
    static const char *const extra[] = {"network", "findings", "redactions", "credentials"};
    for (size_t i = 0; ev && i < TC_ARRAY_SIZE(extra); i++) {
        json_t *v = json_object_get(view, extra[i]);
        if (v)
            json_object_set(ev, extra[i], v);
    }
    /* Collected files: names and sizes, never contents (like stdout, which is only counted) */
    json_t *files = json_object_get(view, "files");
    if (ev && json_array_size(files) > 0) {
        json_t *summary = json_array();
        size_t i;
        json_t *f;
        json_array_foreach(files, i, f)
            json_array_append_new(summary,
                                  json_pack("{s:O, s:O, s:O, s:O, s:O}", "path",
                                            json_object_get(f, "path"), "size",
                                            json_object_get(f, "size"), "truncated",
                                            json_object_get(f, "truncated"), "encoding",
                                            json_object_get(f, "encoding"), "withheld",
                                            json_object_get(f, "withheld")));
        json_object_set_new(ev, "files", summary);
    }
    int rc = -EIO;
    if (!text || !ev)
        goto out;
    PGresult *r = PQexec(c, "BEGIN");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok)
        goto out;
    char wid[37];
    tc_uuid7(wid);
    const char *p[] = {exec_id, tenant_id, json_string_value(json_object_get(view, "status")), text};
    ok = run(c,
             "UPDATE executions SET status = $3, result = $4::jsonb, finished_at = now()"
             " WHERE id = $1 AND tenant_id = $2",
             4, p, true) &&
         tc_audit_append_tx(c, keys, ev, NULL) == 0 &&
         run(c,
             "INSERT INTO webhook_deliveries (id, execution_id, url, body)"
             " SELECT $3, id, callback_url, result FROM executions"
             " WHERE id = $1 AND tenant_id = $2 AND callback_url IS NOT NULL",
             3, (const char *const[]){exec_id, tenant_id, wid}, false) &&
         run(c, "SELECT pg_notify('toolcage_done', $1)", 1, p, false);
    r = PQexec(c, ok ? "COMMIT" : "ROLLBACK");
    ok = ok && PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    rc = ok ? 0 : -EIO;
out:
    free(text);
    json_decref(ev);
    return rc;
}
