#include "execution/record.h"

#include <errno.h>
#include <string.h>

#include "audit/audit.h"
#include "common/util.h"
#include "core/db.h"
#include "execution/quota.h"

/* The outcome's audit record: what ran, how it ended, never the output itself. */
static json_t *outcome_event(const struct tc_finish *f, const char *action)
{
    json_t *view = f->view;
    const char *out = json_string_value(json_object_get(view, "stdout"));
    const char *err = json_string_value(json_object_get(view, "stderr"));
    json_t *ev = json_pack(
        "{s:s, s:s, s:O, s:s, s:s, s:s*, s:O, s:O, s:O, s:O, s:O, s:O, s:I, s:O, s:O, s:O}",
        "action", action, "tenant_id", f->tenant_id, "actor", f->actor, "tool", f->tool,
        "execution_id", f->exec_id, "request_id", f->request_id, "status",
        json_object_get(view, "status"), "exit_code", json_object_get(view, "exit_code"),
        "killed_reason", json_object_get(view, "killed_reason"), "duration_ms",
        json_object_get(view, "duration_ms"), "cpu_ms", json_object_get(view, "cpu_ms"),
        "memory_peak_bytes", json_object_get(view, "memory_peak_bytes"), "output_bytes",
        (json_int_t)((out ? strlen(out) : 0) + (err ? strlen(err) : 0)), "policy_violations",
        json_object_get(view, "policy_violations"), "enforced", json_object_get(view, "enforced"),
        "error", json_object_get(view, "error"));
    /* what the sandbox reached for, what the pre-screen saw, and what was scrubbed; whether
     * the program was released to run, and whether a human must look */
    static const char *const extra[] = {"network",     "findings", "redactions",
                                        "credentials", "started",  "needs_review"};
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
        json_t *fl;
        json_array_foreach(files, i, fl) json_array_append_new(
            summary,
            json_pack("{s:O, s:O, s:O, s:O, s:O}", "path", json_object_get(fl, "path"), "size",
                      json_object_get(fl, "size"), "truncated", json_object_get(fl, "truncated"),
                      "encoding", json_object_get(fl, "encoding"), "withheld",
                      json_object_get(fl, "withheld")));
        json_object_set_new(ev, "files", summary);
    }
    return ev;
}

int tc_execution_finish_tx(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f)
{
    char *text = json_dumps(f->view, JSON_COMPACT);
    char claimed[16], wid[37];
    snprintf(claimed, sizeof(claimed), "%d", f->claimed_by);
    tc_uuid7(wid);
    const char *p[] = {
        f->exec_id, f->tenant_id, json_string_value(json_object_get(f->view, "status")),
        text,       claimed,      f->needs_review ? "t" : "f",
        wid,        f->exec_id};
    int rc = -EIO;
    json_t *ev = NULL;
    if (!text || !p[2])
        goto out;
    /* The transition: running under this claim -> final. "started" comes from the row, so
     * that the record tells what the start record says, whatever this process believed. In
     * the same statement, the callback's delivery (if it asked for one) and the news for
     * long-polls (both go at the commit, or not at all). */
    PGresult *r = tc_db_exec(
        c,
        "WITH u AS (UPDATE executions SET status = $3,"
        " result = $4::jsonb || jsonb_build_object('started', code_started_at IS NOT NULL),"
        " finished_at = now(), needs_review = $6::bool"
        " WHERE id = $1 AND tenant_id = $2 AND status = 'running' AND claimed_by = $5::int"
        " RETURNING id, code_started_at IS NOT NULL AS started, callback_url, result),"
        " hook AS (INSERT INTO webhook_deliveries (id, execution_id, url, body)"
        " SELECT $7, id, callback_url, result FROM u WHERE callback_url IS NOT NULL)"
        " SELECT started, pg_notify('toolcage_done', $8) FROM u",
        8, p);
    if (!r)
        goto out;
    if (PQntuples(r) != 1) {
        PQclear(r);
        /* Not ours to close. Ours already (an earlier attempt committed, its answer lost)? */
        r = tc_db_exec(
            c,
            "SELECT 1 FROM executions WHERE id = $1 AND tenant_id = $2 AND claimed_by = $5::int"
            " AND status = $3 AND result - 'started' = $4::jsonb - 'started'",
            5, p);
        rc = !r ? -EIO : PQntuples(r) == 1 ? 0 : -ESTALE;
        PQclear(r);
        goto out;
    }
    bool started = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    json_object_set_new(f->view, "started", json_boolean(started));
    ev = outcome_event(f, f->action);
    /* the tenant's daily budgets count what ran (execution/quota.h) */
    if (ev &&
        tc_quota_add_usage_tx(
            c, f->tenant_id, json_integer_value(json_object_get(f->view, "cpu_ms")),
            started ? json_integer_value(json_object_get(f->view, "duration_ms")) : 0) &&
        tc_audit_append_tx(c, keys, ev, NULL) == 0)
        rc = 0;
out:
    free(text);
    json_decref(ev);
    return rc;
}

int tc_execution_finish(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    int rc = tc_execution_finish_tx(c, keys, f);
    return tc_db_finish(c, rc);
}

int tc_execution_late_result(PGconn *c, const struct tc_keys *keys, const struct tc_finish *f,
                             json_t **ret_stored)
{
    char *text = json_dumps(f->view, JSON_COMPACT);
    const char *p[] = {f->exec_id, f->tenant_id, text};
    json_t *stored = NULL, *ev = NULL;
    int rc = -EIO;
    if (!text || !tc_db_command(c, "BEGIN"))
        goto out;
    /* Kept once, next to the outcome (the trigger refuses it on a row that is not final). */
    PGresult *r = tc_db_exec(c,
                             "UPDATE executions SET late_result = $3::jsonb,"
                             " needs_review = needs_review OR EXISTS (SELECT 1 FROM approvals a"
                             "   WHERE a.execution_id = executions.id)"
                             " WHERE id = $1 AND tenant_id = $2 AND late_result IS NULL"
                             " AND status NOT IN ('pending_approval', 'queued', 'running')",
                             3, p);
    bool ok = r != NULL;
    PQclear(r);
    r = ok ? tc_db_exec(c,
                        "SELECT status, result::text, needs_review FROM executions"
                        " WHERE id = $1 AND tenant_id = $2",
                        2, p)
           : NULL;
    ok = r && PQntuples(r) == 1;
    if (ok && !PQgetisnull(r, 0, 1))
        stored = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    if (ok) {
        ev = outcome_event(f, "execution.late_result");
        if (ev) {
            json_object_set_new(ev, "stored_status", json_string(PQgetvalue(r, 0, 0)));
            json_object_set_new(ev, "needs_review",
                                json_boolean(strcmp(PQgetvalue(r, 0, 2), "t") == 0));
        }
        ok = ev && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    }
    PQclear(r);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    if (ok) {
        rc = 0;
        if (ret_stored) {
            *ret_stored = stored;
            stored = NULL;
        }
    }
out:
    free(text);
    json_decref(ev);
    json_decref(stored);
    return rc;
}
