#include "execution/quota.h"

#include <errno.h>
#include <math.h>
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

/* The tenant's own rate (-1: none) into *ret. 0 or -EIO. */
static int own_rate(PGconn *c, const char *tenant_id, int64_t *ret)
{
    const char *p[] = {tenant_id};
    PGresult *r =
        tc_db_exec(c, "SELECT rate_per_minute FROM tenant_quotas WHERE tenant_id = $1", 1, p);
    if (!r) {
        PQclear(r);
        return -EIO;
    }
    *ret = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return 0;
}

/* One token from the bucket `scope` of `per_minute` tokens (refilled continuously): 0, or
 * -EDQUOT with the seconds until one is there, or -EIO. The row lock taken here orders
 * concurrent takers (a second waits for the first's transaction, then sees its bucket). */
static int take_token(PGconn *c, const char *scope, int64_t per_minute, int64_t *ret_retry_s)
{
    char cap[24], rate[32];
    snprintf(cap, sizeof(cap), "%lld", (long long)per_minute);
    snprintf(rate, sizeof(rate), "%.9f", (double)per_minute / 60.0);
    const char *p[] = {scope, cap, rate};
    PGresult *r =
        tc_db_exec(c,
                   "WITH cur AS (SELECT LEAST($2::float8, coalesce((SELECT tokens"
                   "   + extract(epoch FROM clock_timestamp() - updated_at) * $3::float8"
                   "   FROM rate_buckets WHERE scope = $1 FOR UPDATE), $2::float8)) AS t)"
                   " INSERT INTO rate_buckets (scope, tokens, updated_at)"
                   " SELECT $1, CASE WHEN t >= 1 THEN t - 1 ELSE t END, clock_timestamp() FROM cur"
                   " ON CONFLICT (scope) DO UPDATE SET tokens = EXCLUDED.tokens,"
                   " updated_at = EXCLUDED.updated_at"
                   " RETURNING (SELECT t FROM cur)",
                   3, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    double t = strtod(PQgetvalue(r, 0, 0), NULL);
    PQclear(r);
    if (t >= 1.0)
        return 0;
    double per_s = (double)per_minute / 60.0;
    *ret_retry_s = per_s > 0 ? (int64_t)ceil((1.0 - t) / per_s) : 60;
    if (*ret_retry_s < 1)
        *ret_retry_s = 1;
    return -EDQUOT;
}

int tc_quota_admit_call_tx(PGconn *c, const char *tenant_id, const char *key_id,
                           const struct tc_quota_defaults *d, struct tc_quota_refusal *ret)
{
    struct tc_quota q;
    int rc = tc_quota_admit_tx(c, tenant_id, d->max_concurrent, &q);
    if (rc == -EDQUOT)
        *ret = (struct tc_quota_refusal){.limit = "max_concurrent",
                                         .value = q.max_concurrent,
                                         .running = q.running,
                                         .retry_after_s = 1,
                                         .own = q.own};
    if (rc < 0)
        return rc;
    int64_t rate;
    if (own_rate(c, tenant_id, &rate) < 0)
        return -EIO;
    bool own = rate >= 0;
    if (!own)
        rate = d->tenant_rate_per_minute > 0 ? d->tenant_rate_per_minute : -1;
    char scope[64];
    int64_t retry = 0;
    if (rate >= 0) {
        snprintf(scope, sizeof(scope), "tenant:%s", tenant_id);
        rc = rate == 0 ? (retry = 60, -EDQUOT) : take_token(c, scope, rate, &retry);
        if (rc == -EDQUOT)
            *ret = (struct tc_quota_refusal){
                .limit = "rate_per_minute", .value = rate, .retry_after_s = retry, .own = own};
        if (rc < 0)
            return rc;
    }
    if (d->key_rate_per_minute > 0 && key_id && *key_id) {
        snprintf(scope, sizeof(scope), "key:%s", key_id);
        rc = take_token(c, scope, d->key_rate_per_minute, &retry);
        if (rc == -EDQUOT)
            *ret = (struct tc_quota_refusal){.limit = "key_rate_per_minute",
                                             .value = d->key_rate_per_minute,
                                             .retry_after_s = retry};
        if (rc < 0)
            return rc;
    }
    return 0;
}

int tc_quota_set(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                 int64_t max_concurrent, int64_t rate_per_minute, json_t *actor)
{
    char mv[24], rv[24];
    snprintf(mv, sizeof(mv), "%lld", (long long)max_concurrent);
    snprintf(rv, sizeof(rv), "%lld", (long long)rate_per_minute);
    const char *p[] = {
        tenant_id, max_concurrent >= 0 ? mv : NULL, max_concurrent == TC_QUOTA_KEEP ? "t" : "f",
        rate_per_minute >= 0 ? rv : NULL, rate_per_minute == TC_QUOTA_KEEP ? "t" : "f"};
    json_t *changed = json_object();
    if (max_concurrent != TC_QUOTA_KEEP)
        json_object_set_new(changed, "max_concurrent",
                            max_concurrent >= 0 ? json_integer(max_concurrent) : json_null());
    if (rate_per_minute != TC_QUOTA_KEEP)
        json_object_set_new(changed, "rate_per_minute",
                            rate_per_minute >= 0 ? json_integer(rate_per_minute) : json_null());
    json_t *ev = json_pack("{s:s, s:s, s:O, s:o}", "action", "tenant.quota_set", "tenant_id",
                           tenant_id, "actor", actor, "quota", changed);
    if (!ev || !tc_db_command(c, "BEGIN")) {
        json_decref(ev);
        return -EIO;
    }
    PGresult *r =
        tc_db_exec(c,
                   "INSERT INTO tenant_quotas (tenant_id, max_concurrent, rate_per_minute)"
                   " VALUES ($1, $2::int, $4::int) ON CONFLICT (tenant_id) DO UPDATE SET"
                   " max_concurrent = CASE WHEN $3::boolean THEN tenant_quotas.max_concurrent"
                   "                  ELSE EXCLUDED.max_concurrent END,"
                   " rate_per_minute = CASE WHEN $5::boolean THEN tenant_quotas.rate_per_minute"
                   "                   ELSE EXCLUDED.rate_per_minute END,"
                   " updated_at = now()",
                   5, p);
    bool ok = r != NULL && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    PQclear(r);
    json_decref(ev);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    return ok ? 0 : -EIO;
}

json_t *tc_quota_describe(PGconn *c, const char *tenant_id, const struct tc_quota_defaults *d)
{
    struct tc_quota q;
    int64_t rate;
    if (load(c, tenant_id, d->max_concurrent, &q) < 0 || own_rate(c, tenant_id, &rate) < 0)
        return NULL;
    bool own_r = rate >= 0;
    if (!own_r)
        rate = d->tenant_rate_per_minute > 0 ? d->tenant_rate_per_minute : -1;
    return json_pack("{s:{s:o, s:s, s:I}, s:{s:o, s:s, s:o}}", "concurrent", "max_concurrent",
                     q.max_concurrent >= 0 ? json_integer(q.max_concurrent) : json_null(), "source",
                     q.own ? "tenant" : "default", "running", (json_int_t)q.running, "rate",
                     "rate_per_minute", rate >= 0 ? json_integer(rate) : json_null(), "source",
                     own_r ? "tenant" : "default", "key_rate_per_minute",
                     d->key_rate_per_minute > 0 ? json_integer(d->key_rate_per_minute)
                                                : json_null());
}
