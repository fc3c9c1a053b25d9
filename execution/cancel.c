#include "execution/cancel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "core/db.h"

static bool exec_ok(PGconn *c, const char *sql, int n, const char *const *p)
{
    PGresult *r = tc_db_exec(c, sql, n, p);
    PQclear(r);
    return r != NULL;
}

/* queued -> cancelled (migrations/0010): the call never ran; its one outcome record says so. */
int tc_execution_close_queued_tx(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                                 const char *id, const char *tool, json_t *actor)
{
    /* no result: like a call withdrawn while held, its view is that of a call never run */
    const char *p[] = {id};
    PGresult *r = tc_db_exec(c,
                             "UPDATE executions SET status = 'cancelled', finished_at = now()"
                             " WHERE id = $1 AND status = 'queued'",
                             1, p);
    bool closed = r && strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    if (!closed)
        return -EIO;
    if (!exec_ok(c, "SELECT pg_notify('toolcage_done', $1)", 1, p))
        return -EIO;
    json_t *ev =
        json_pack("{s:s, s:s, s:O, s:s, s:s, s:s, s:b, s:s}", "action", "execution.complete",
                  "tenant_id", tenant_id, "actor", actor, "tool", tool, "execution_id", id,
                  "status", "cancelled", "started", 0, "killed_reason", "cancelled");
    int rc = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
    json_decref(ev);
    return rc < 0 ? rc : TC_CANCEL_DONE;
}

/* running: who asked is audited; every server hears it at commit. */
static int request_kill(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        const char *id, const char *tool, json_t *actor)
{
    const char *p[] = {id};
    if (!exec_ok(c, "SELECT pg_notify('toolcage_cancel', $1)", 1, p))
        return -EIO;
    json_t *ev =
        json_pack("{s:s, s:s, s:O, s:s, s:s}", "action", "execution.cancel_requested", "tenant_id",
                  tenant_id, "actor", actor, "tool", tool, "execution_id", id);
    int rc = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
    json_decref(ev);
    return rc < 0 ? rc : TC_CANCEL_REQUESTED;
}

int tc_execution_cancel(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                        const char *execution_id, json_t *actor)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    const char *p[] = {execution_id, tenant_id};
    /* The row lock orders this against the claim and the outcome of the same row. */
    PGresult *r = tc_db_exec(c,
                             "SELECT status, tool FROM executions"
                             " WHERE id = $1 AND tenant_id = $2 FOR UPDATE",
                             2, p);
    int rc = -EIO;
    if (r && PQntuples(r) == 0)
        rc = -ENOENT;
    else if (r) {
        const char *status = PQgetvalue(r, 0, 0), *tool = PQgetvalue(r, 0, 1);
        if (strcmp(status, "queued") == 0)
            rc = tc_execution_close_queued_tx(c, keys, tenant_id, execution_id, tool, actor);
        else if (strcmp(status, "running") == 0)
            rc = request_kill(c, keys, tenant_id, execution_id, tool, actor);
        else
            rc = -ESTALE;
    }
    PQclear(r);
    int done = tc_db_finish(c, rc < 0 ? rc : 0);
    return done < 0 ? done : rc;
}
