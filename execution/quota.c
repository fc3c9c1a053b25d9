#include "execution/quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "core/db.h"

/* pg_advisory_xact_lock(class, key): one class for admissions, keyed by the tenant. */
#define ADMISSION_LOCK_CLASS "7716"

static int load(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret)
{
    const char *p[] = {tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT (SELECT count(*) FROM executions WHERE tenant_id = $1"
                             "        AND status = 'running'),"
                             " (SELECT max_concurrent FROM tenant_quotas WHERE tenant_id = $1),"
                             " EXISTS (SELECT 1 FROM tenant_quotas WHERE tenant_id = $1"
                             "         AND max_concurrent IS NOT NULL)",
                             1, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    ret->running = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    ret->own = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
    ret->max_concurrent =
        ret->own ? strtoll(PQgetvalue(r, 0, 1), NULL, 10) : (default_max > 0 ? default_max : -1);
    PQclear(r);
    return 0;
}

int tc_quota_admit_tx(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret)
{
    const char *p[] = {tenant_id};
    PGresult *r =
        tc_db_exec(c, "SELECT pg_advisory_xact_lock(" ADMISSION_LOCK_CLASS ", hashtext($1))", 1, p);
    bool locked = r != NULL;
    PQclear(r);
    if (!locked || load(c, tenant_id, default_max, ret) < 0)
        return -EIO;
    return ret->max_concurrent >= 0 && ret->running >= ret->max_concurrent ? -EDQUOT : 0;
}

int tc_quota_get(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret)
{
    return load(c, tenant_id, default_max, ret);
}

int tc_quota_set(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                 int64_t max_concurrent, json_t *actor)
{
    char v[24];
    snprintf(v, sizeof(v), "%lld", (long long)max_concurrent);
    const char *p[] = {tenant_id, max_concurrent >= 0 ? v : NULL};
    json_t *ev = json_pack("{s:s, s:s, s:O, s:{s:o}}", "action", "tenant.quota_set", "tenant_id",
                           tenant_id, "actor", actor, "quota", "max_concurrent",
                           max_concurrent >= 0 ? json_integer(max_concurrent) : json_null());
    if (!ev || !tc_db_command(c, "BEGIN")) {
        json_decref(ev);
        return -EIO;
    }
    PGresult *r = tc_db_exec(c,
                             "INSERT INTO tenant_quotas (tenant_id, max_concurrent)"
                             " VALUES ($1, $2::int) ON CONFLICT (tenant_id) DO UPDATE"
                             " SET max_concurrent = EXCLUDED.max_concurrent, updated_at = now()",
                             2, p);
    bool ok = r != NULL && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    PQclear(r);
    json_decref(ev);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    return ok ? 0 : -EIO;
}

json_t *tc_quota_json(const struct tc_quota *q)
{
    return json_pack("{s:o, s:s, s:I}", "max_concurrent",
                     q->max_concurrent >= 0 ? json_integer(q->max_concurrent) : json_null(),
                     "source", q->own ? "tenant" : "default", "running", (json_int_t)q->running);
}
