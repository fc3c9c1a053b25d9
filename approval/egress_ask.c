#include "approval/egress_ask.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval/approval.h"
#include "audit/audit.h"
#include "common/util.h"
#include "core/db.h"

static const char *const verdicts[] = {"allow_once", "allow_execution", "deny"};
static const char *const verdict_status[] = {"allowed_once", "allowed_execution", "denied"};

int tc_egress_verdict_parse(const char *s)
{
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, verdicts[i]) == 0)
            return i;
    return -1;
}

const char *tc_egress_verdict_name(enum tc_egress_verdict v)
{
    return verdicts[v];
}

/* The row as the API shows it: the execution's code included (what the reviewer judges) in
 * ASK_VIEW; not in lists (ASK_LIST_VIEW: it can be large, and an execution asks up to 8 times).
 */
// clang-format off
#define ASK_FIELDS                                                                                 \
    "'id', a.id, 'execution_id', a.execution_id, 'tool', a.tool, 'host', a.host,"                  \
    " 'port', a.port, 'status', a.status,"                                                         \
    " 'created_at', " TC_SQL_ISO("a.created_at") ", 'expires_at', " TC_SQL_ISO("a.expires_at") ","  \
    " 'decided_at', " TC_SQL_ISO("a.decided_at") ", 'decider', a.decider, 'reason', a.reason"
#define ASK_VIEW      "json_build_object(" ASK_FIELDS ", 'code', e.request->>'code')::text"
#define ASK_LIST_VIEW "json_build_object(" ASK_FIELDS ", 'code', NULL)::text"
// clang-format on

static int audit_tx(PGconn *c, const struct tc_keys *keys, json_t *ev)
{
    int rc = ev ? tc_audit_append_tx(c, keys, ev, NULL) : -ENOMEM;
    json_decref(ev);
    return rc;
}

int tc_egress_ask_insert(PGconn *c, const struct tc_keys *keys, const char *execution_id, long n,
                         const char *host, int port, int64_t timeout_ms, const char *public_url,
                         char ret_id[37])
{
    char id[37], ns[24], ps[8], ms[24];
    tc_uuid7(id);
    snprintf(ns, sizeof(ns), "%ld", n);
    snprintf(ps, sizeof(ps), "%d", port);
    snprintf(ms, sizeof(ms), "%lld", (long long)timeout_ms);
    const char *p[] = {id, execution_id, ns, host, ps, ms};
    if (tc_db_begin(c) < 0)
        return -EIO;
    PGresult *r =
        tc_db_exec(c,
                   "INSERT INTO egress_asks (id, tenant_id, execution_id, ask, tool, host,"
                   " port, status, expires_at)"
                   " SELECT $1, e.tenant_id, e.id, $3::int, e.tool, $4, $5::int,"
                   " 'pending', now() + make_interval(secs => $6::bigint / 1000.0)"
                   " FROM executions e WHERE e.id = $2 AND e.status = 'running'"
                   " RETURNING tenant_id, tool",
                   6, p);
    if (!r)
        return tc_db_finish(c, -EIO);
    if (PQntuples(r) != 1) {
        PQclear(r);
        return tc_db_finish(c, -ENOENT);
    }
    json_t *ev = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:i, s:I}", "action",
                           "egress.ask", "status", "pending", "tenant_id", PQgetvalue(r, 0, 0),
                           "actor", "type", "system", "id", "egress-proxy", "tool",
                           PQgetvalue(r, 0, 1), "execution_id", execution_id, "ask_id", id, "host",
                           host, "port", port, "timeout_ms", (json_int_t)timeout_ms);
    char tenant[37];
    snprintf(tenant, sizeof(tenant), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    int rc = audit_tx(c, keys, ev);
    /* the reviewers' notices are best-effort: a failure there must not keep the ask from them */
    if (rc == 0 && tc_db_command(c, "SAVEPOINT notify")) {
        if (tc_egress_ask_notify_tx(c, tenant, id, public_url) == 0)
            (void)tc_db_command(c, "RELEASE SAVEPOINT notify");
        else if (!tc_db_command(c, "ROLLBACK TO SAVEPOINT notify"))
            rc = -EIO;
    }
    rc = tc_db_finish(c, rc);
    if (rc == 0)
        memcpy(ret_id, id, 37);
    return rc;
}

int tc_egress_ask_decide(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                         const char *ask_id, const char *decider, const char *decider_key,
                         const char *decider_person, json_t *actor, enum tc_egress_verdict v,
                         const char *reason)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    const char *p[] = {ask_id, tenant_id};
    /* The row lock orders concurrent answers: the first wins, the others see it decided. */
    PGresult *r = tc_db_exec(c,
                             "SELECT a.status, a.expires_at <= now(), a.execution_id, a.tool,"
                             " a.host, a.port, coalesce(e.api_key_id::text, ''),"
                             " coalesce(k.person_id::text, ''), e.status = 'running'"
                             " FROM egress_asks a JOIN executions e ON e.id = a.execution_id"
                             " LEFT JOIN api_keys k ON k.id = e.api_key_id"
                             " WHERE a.id = $1 AND a.tenant_id = $2 FOR UPDATE OF a",
                             2, p);
    if (!r)
        return tc_db_finish(c, -EIO);
    if (PQntuples(r) != 1) {
        PQclear(r);
        return tc_db_finish(c, -ENOENT);
    }
    bool pending = strcmp(PQgetvalue(r, 0, 0), "pending") == 0;
    bool expired = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    bool running = strcmp(PQgetvalue(r, 0, 8), "t") == 0;
    bool own =
        (decider_key && *decider_key && strcmp(PQgetvalue(r, 0, 6), decider_key) == 0) ||
        (decider_person && *decider_person && strcmp(PQgetvalue(r, 0, 7), decider_person) == 0);
    json_t *ev = json_pack(
        "{s:s, s:s, s:O, s:s, s:s, s:s, s:s, s:i, s:s, s:s*}", "action", "egress.decision",
        "tenant_id", tenant_id, "actor", actor, "tool", PQgetvalue(r, 0, 3), "execution_id",
        PQgetvalue(r, 0, 2), "ask_id", ask_id, "host", PQgetvalue(r, 0, 4), "port",
        (int)strtol(PQgetvalue(r, 0, 5), NULL, 10), "status", verdict_status[v], "reason", reason);
    PQclear(r);
    if (pending && !running) { /* its execution ended (its server may be gone): withdrawn */
        json_decref(ev);
        (void)tc_db_finish(c, 0);
        (void)tc_egress_ask_close(c, keys, ask_id, "withdrawn");
        return -ESTALE;
    }
    if (!pending || expired || own) {
        json_decref(ev);
        return tc_db_finish(c, own && pending && !expired ? -EPERM : -ESTALE);
    }
    const char *pu[] = {ask_id, verdict_status[v], decider, reason};
    r = tc_db_exec(c,
                   "UPDATE egress_asks SET status = $2, decided_at = now(), decider = $3,"
                   " reason = $4 WHERE id = $1",
                   4, pu);
    int rc = r ? 0 : -EIO;
    PQclear(r);
    if (rc == 0)
        return tc_db_finish(c, audit_tx(c, keys, ev));
    json_decref(ev);
    return tc_db_finish(c, rc);
}

int tc_egress_ask_close(PGconn *c, const struct tc_keys *keys, const char *ask_id,
                        const char *status)
{
    if (tc_db_begin(c) < 0)
        return -EIO;
    const char *p[] = {ask_id, status};
    PGresult *r = tc_db_exec(c,
                             "UPDATE egress_asks SET status = $2, decided_at = now()"
                             " WHERE id = $1 AND status = 'pending'"
                             " RETURNING tenant_id, execution_id, tool, host, port",
                             2, p);
    if (!r)
        return tc_db_finish(c, -EIO);
    int rc = 0;
    if (PQntuples(r) == 1) {
        json_t *ev =
            json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:i}", "action",
                      strcmp(status, "expired") == 0 ? "egress.expired" : "egress.withdrawn",
                      "status", status, "tenant_id", PQgetvalue(r, 0, 0), "actor", "type", "system",
                      "id", "egress-proxy", "execution_id", PQgetvalue(r, 0, 1), "tool",
                      PQgetvalue(r, 0, 2), "ask_id", ask_id, "host", PQgetvalue(r, 0, 3), "port",
                      (int)strtol(PQgetvalue(r, 0, 4), NULL, 10));
        rc = audit_tx(c, keys, ev);
    }
    PQclear(r);
    return tc_db_finish(c, rc);
}

int tc_egress_ask_expire_due(PGconn *c, const struct tc_keys *keys, int grace_s)
{
    char g[16];
    snprintf(g, sizeof(g), "%d", grace_s);
    const char *p[] = {g};
    PGresult *r = tc_db_exec(c,
                             "SELECT id FROM egress_asks WHERE status = 'pending'"
                             " AND expires_at < now() - make_interval(secs => $1::int)"
                             " ORDER BY expires_at LIMIT 100",
                             1, p);
    if (!r)
        return -EIO;
    int n = 0;
    for (int i = 0; i < PQntuples(r); i++)
        if (tc_egress_ask_close(c, keys, PQgetvalue(r, i, 0), "expired") == 0)
            n++;
    PQclear(r);
    return n;
}

json_t *tc_egress_ask_get(PGconn *c, const char *tenant_id, const char *ask_id, int *ret_err)
{
    const char *p[] = {ask_id, tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT " ASK_VIEW " FROM egress_asks a"
                             " JOIN executions e ON e.id = a.execution_id"
                             " WHERE a.id = $1 AND a.tenant_id = $2",
                             2, p);
    json_t *j = r && PQntuples(r) == 1 ? json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
    *ret_err = !r ? -EIO : !j ? -ENOENT : 0;
    PQclear(r);
    return j;
}

json_t *tc_egress_ask_list(PGconn *c, const char *tenant_id, const char *status, int limit)
{
    char l[16];
    snprintf(l, sizeof(l), "%d", limit);
    const char *p[] = {tenant_id, status, l};
    PGresult *r = tc_db_exec(c,
                             "SELECT " ASK_LIST_VIEW " FROM egress_asks a"
                             " WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.status = $2)"
                             " ORDER BY a.created_at DESC, a.id DESC LIMIT $3::int",
                             3, p);
    if (!r)
        return NULL;
    json_t *arr = json_array();
    for (int i = 0; arr && i < PQntuples(r); i++)
        json_array_append_new(arr, json_loads(PQgetvalue(r, i, 0), 0, NULL));
    PQclear(r);
    return arr;
}
