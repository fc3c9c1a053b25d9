#include "execution/quota.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "core/config.h"
#include "core/db.h"

/* pg_advisory_xact_lock(class, key): one class for admissions, keyed by the tenant. */
#define ADMISSION_LOCK_CLASS "7716"

const char *const tc_quota_limit_names[TC_QUOTA__COUNT] = {
    [TC_QUOTA_MAX_CONCURRENT] = "max_concurrent",
    [TC_QUOTA_RATE_PER_MINUTE] = "rate_per_minute",
    [TC_QUOTA_CPU_SECONDS_PER_DAY] = "cpu_seconds_per_day",
    [TC_QUOTA_WALL_SECONDS_PER_DAY] = "wall_seconds_per_day",
    [TC_QUOTA_MAX_SESSIONS] = "max_sessions",
};
const int64_t tc_quota_limit_max[TC_QUOTA__COUNT] = {4096, 1000000, 100000000, 100000000, 4096};

struct tc_quota_defaults tc_quota_defaults_of(const struct tc_config *cfg)
{
    return (struct tc_quota_defaults){.max_concurrent = cfg->tenant_max_concurrent,
                                      .tenant_rate_per_minute = cfg->tenant_rate_per_minute,
                                      .key_rate_per_minute = cfg->key_rate_per_minute,
                                      .cpu_seconds_per_day = cfg->tenant_cpu_seconds_per_day,
                                      .wall_seconds_per_day = cfg->tenant_wall_seconds_per_day,
                                      .max_sessions = cfg->tenant_max_sessions};
}

/* The tenant's own limits (TC_QUOTA_DEFAULT where none is set) and its executions running
 * now, in one query. 0 or -EIO. */
static int state(PGconn *c, const char *tenant_id, int64_t own[TC_QUOTA__COUNT],
                 int64_t *ret_running)
{
    const char *p[] = {tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT (SELECT count(*) FROM executions WHERE tenant_id = $1"
                             "        AND status = 'running'),"
                             " q.max_concurrent, q.rate_per_minute, q.cpu_seconds_per_day,"
                             " q.wall_seconds_per_day, q.max_sessions"
                             " FROM (SELECT 1) one LEFT JOIN tenant_quotas q ON q.tenant_id = $1",
                             1, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    *ret_running = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    for (int i = 0; i < TC_QUOTA__COUNT; i++)
        own[i] = PQgetisnull(r, 0, 1 + i) ? TC_QUOTA_DEFAULT
                                          : strtoll(PQgetvalue(r, 0, 1 + i), NULL, 10);
    PQclear(r);
    return 0;
}

/* The per-tenant admission lock, held to the end of the transaction (sent with the
 * statement after it: it is taken before that one runs). */
static bool lock_tenant(PGconn *c, const char *tenant_id)
{
    const char *p[] = {tenant_id};
    return tc_db_send(c, "SELECT pg_advisory_xact_lock(" ADMISSION_LOCK_CLASS ", hashtext($1))", 1,
                      p);
}

/* The concurrency check of tc_quota_admit_tx, on the state already read. */
static int admit_concurrent(const int64_t own[TC_QUOTA__COUNT], int64_t running,
                            int64_t default_max, struct tc_quota *ret)
{
    ret->running = running;
    ret->own = own[TC_QUOTA_MAX_CONCURRENT] >= 0;
    ret->max_concurrent =
        ret->own ? own[TC_QUOTA_MAX_CONCURRENT] : (default_max > 0 ? default_max : -1);
    return ret->max_concurrent >= 0 && ret->running >= ret->max_concurrent ? -EDQUOT : 0;
}

int tc_quota_admit_tx(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret)
{
    int64_t own[TC_QUOTA__COUNT], running;
    if (!lock_tenant(c, tenant_id) || state(c, tenant_id, own, &running) < 0)
        return -EIO;
    return admit_concurrent(own, running, default_max, ret);
}

/* The tenant's open sessions (over every replica). -1 on a database error. */
static int64_t open_sessions(PGconn *c, const char *tenant_id)
{
    const char *p[] = {tenant_id};
    PGresult *r = tc_db_exec(
        c, "SELECT count(*) FROM sessions WHERE tenant_id = $1 AND status = 'active'", 1, p);
    int64_t n = r && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

int tc_quota_admit_session_tx(PGconn *c, const char *tenant_id, const struct tc_quota_defaults *d,
                              struct tc_quota_refusal *ret)
{
    int64_t own[TC_QUOTA__COUNT], running, open;
    if (!lock_tenant(c, tenant_id) || state(c, tenant_id, own, &running) < 0 ||
        (open = open_sessions(c, tenant_id)) < 0)
        return -EIO;
    bool mine = own[TC_QUOTA_MAX_SESSIONS] >= 0;
    int64_t max = mine ? own[TC_QUOTA_MAX_SESSIONS] : d->max_sessions > 0 ? d->max_sessions : -1;
    if (max < 0 || open < max)
        return 0;
    *ret = (struct tc_quota_refusal){
        .limit = "max_sessions", .value = max, .running = open, .retry_after_s = 10, .own = mine};
    return -EDQUOT;
}

/* The limit in force: the tenant's own, else the server's default (0 there: none, -1). */
static int64_t effective(int64_t own, int64_t def)
{
    return own >= 0 ? own : def > 0 ? def : -1;
}

/* The tenant's CPU and wall milliseconds of the last 24 hours, and the seconds until the
 * oldest hour with use leaves the window. 0 or -EIO. */
static int usage_day(PGconn *c, const char *tenant_id, int64_t *cpu_ms, int64_t *wall_ms,
                     int64_t *frees_in_s)
{
    const char *p[] = {tenant_id};
    PGresult *r = tc_db_exec(c,
                             "SELECT coalesce(sum(cpu_ms), 0), coalesce(sum(wall_ms), 0),"
                             " coalesce(ceil(extract(epoch FROM min(hour) + interval '24 hours'"
                             "   - now())), 3600)"
                             " FROM tenant_usage WHERE tenant_id = $1"
                             " AND hour > now() - interval '24 hours'",
                             1, p);
    if (!r || PQntuples(r) != 1) {
        PQclear(r);
        return -EIO;
    }
    *cpu_ms = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    *wall_ms = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    *frees_in_s = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
    if (*frees_in_s < 1)
        *frees_in_s = 1;
    PQclear(r);
    return 0;
}

bool tc_quota_add_usage_tx(PGconn *c, const char *tenant_id, int64_t cpu_ms, int64_t wall_ms)
{
    char cpu[24], wall[24];
    snprintf(cpu, sizeof(cpu), "%lld", (long long)(cpu_ms > 0 ? cpu_ms : 0));
    snprintf(wall, sizeof(wall), "%lld", (long long)(wall_ms > 0 ? wall_ms : 0));
    const char *p[] = {tenant_id, cpu, wall};
    /* (sent with the transaction's next statement: a failure fails that one, and the commit) */
    return tc_db_send(c,
                      "INSERT INTO tenant_usage (tenant_id, hour, cpu_ms, wall_ms)"
                      " VALUES ($1, date_trunc('hour', now()), $2::bigint, $3::bigint)"
                      " ON CONFLICT (tenant_id, hour) DO UPDATE SET"
                      " cpu_ms = tenant_usage.cpu_ms + EXCLUDED.cpu_ms,"
                      " wall_ms = tenant_usage.wall_ms + EXCLUDED.wall_ms",
                      3, p);
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
    int64_t own[TC_QUOTA__COUNT], running;
    if (!lock_tenant(c, tenant_id) || state(c, tenant_id, own, &running) < 0)
        return -EIO;
    int rc = admit_concurrent(own, running, d->max_concurrent, &q);
    if (rc == -EDQUOT)
        *ret = (struct tc_quota_refusal){.limit = "max_concurrent",
                                         .value = q.max_concurrent,
                                         .running = q.running,
                                         .retry_after_s = 1,
                                         .own = q.own};
    if (rc < 0)
        return rc;
    /* the daily budgets, before a token is spent on a call that could not start */
    int64_t cpu_lim = effective(own[TC_QUOTA_CPU_SECONDS_PER_DAY], d->cpu_seconds_per_day);
    int64_t wall_lim = effective(own[TC_QUOTA_WALL_SECONDS_PER_DAY], d->wall_seconds_per_day);
    if (cpu_lim >= 0 || wall_lim >= 0) {
        int64_t cpu_ms, wall_ms, frees;
        if (usage_day(c, tenant_id, &cpu_ms, &wall_ms, &frees) < 0)
            return -EIO;
        if (cpu_lim >= 0 && cpu_ms >= cpu_lim * 1000) {
            *ret = (struct tc_quota_refusal){.limit = "cpu_seconds_per_day",
                                             .value = cpu_lim,
                                             .running = cpu_ms / 1000,
                                             .retry_after_s = frees,
                                             .own = own[TC_QUOTA_CPU_SECONDS_PER_DAY] >= 0};
            return -EDQUOT;
        }
        if (wall_lim >= 0 && wall_ms >= wall_lim * 1000) {
            *ret = (struct tc_quota_refusal){.limit = "wall_seconds_per_day",
                                             .value = wall_lim,
                                             .running = wall_ms / 1000,
                                             .retry_after_s = frees,
                                             .own = own[TC_QUOTA_WALL_SECONDS_PER_DAY] >= 0};
            return -EDQUOT;
        }
    }
    int64_t rate = effective(own[TC_QUOTA_RATE_PER_MINUTE], d->tenant_rate_per_minute);
    bool own_rate = own[TC_QUOTA_RATE_PER_MINUTE] >= 0;
    char scope[64];
    int64_t retry = 0;
    if (rate >= 0) {
        snprintf(scope, sizeof(scope), "tenant:%s", tenant_id);
        rc = rate == 0 ? (retry = 60, -EDQUOT) : take_token(c, scope, rate, &retry);
        if (rc == -EDQUOT)
            *ret = (struct tc_quota_refusal){
                .limit = "rate_per_minute", .value = rate, .retry_after_s = retry, .own = own_rate};
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
                 const int64_t limits[TC_QUOTA__COUNT], json_t *actor)
{
    char v[TC_QUOTA__COUNT][24];
    const char *p[1 + 2 * TC_QUOTA__COUNT] = {tenant_id};
    json_t *changed = json_object();
    for (int i = 0; i < TC_QUOTA__COUNT; i++) {
        snprintf(v[i], sizeof(v[i]), "%lld", (long long)limits[i]);
        p[1 + 2 * i] = limits[i] >= 0 ? v[i] : NULL;
        p[2 + 2 * i] = limits[i] == TC_QUOTA_KEEP ? "t" : "f";
        if (limits[i] != TC_QUOTA_KEEP)
            json_object_set_new(changed, tc_quota_limit_names[i],
                                limits[i] >= 0 ? json_integer(limits[i]) : json_null());
    }
    json_t *ev = json_pack("{s:s, s:s, s:O, s:o}", "action", "tenant.quota_set", "tenant_id",
                           tenant_id, "actor", actor, "quota", changed);
    if (!ev || !tc_db_command(c, "BEGIN")) {
        json_decref(ev);
        return -EIO;
    }
    PGresult *r = tc_db_exec(
        c,
        "INSERT INTO tenant_quotas (tenant_id, max_concurrent, rate_per_minute,"
        " cpu_seconds_per_day, wall_seconds_per_day, max_sessions)"
        " VALUES ($1, $2::int, $4::int, $6::int, $8::int, $10::int)"
        " ON CONFLICT (tenant_id) DO UPDATE SET"
        " max_concurrent = CASE WHEN $3::boolean THEN tenant_quotas.max_concurrent"
        "                  ELSE EXCLUDED.max_concurrent END,"
        " rate_per_minute = CASE WHEN $5::boolean THEN tenant_quotas.rate_per_minute"
        "                   ELSE EXCLUDED.rate_per_minute END,"
        " cpu_seconds_per_day = CASE WHEN $7::boolean THEN tenant_quotas.cpu_seconds_per_day"
        "                       ELSE EXCLUDED.cpu_seconds_per_day END,"
        " wall_seconds_per_day = CASE WHEN $9::boolean THEN tenant_quotas.wall_seconds_per_day"
        "                        ELSE EXCLUDED.wall_seconds_per_day END,"
        " max_sessions = CASE WHEN $11::boolean THEN tenant_quotas.max_sessions"
        "                ELSE EXCLUDED.max_sessions END,"
        " updated_at = now()",
        1 + 2 * TC_QUOTA__COUNT, p);
    bool ok = r != NULL && tc_audit_append_tx(c, keys, ev, NULL) == 0;
    PQclear(r);
    json_decref(ev);
    ok = tc_db_command(c, ok ? "COMMIT" : "ROLLBACK") && ok;
    return ok ? 0 : -EIO;
}

json_t *tc_quota_describe(PGconn *c, const char *tenant_id, const struct tc_quota_defaults *d)
{
    struct tc_quota q;
    int64_t own[TC_QUOTA__COUNT], running, cpu_ms, wall_ms, frees;
    int64_t open;
    if (state(c, tenant_id, own, &running) < 0 ||
        usage_day(c, tenant_id, &cpu_ms, &wall_ms, &frees) < 0 ||
        (open = open_sessions(c, tenant_id)) < 0)
        return NULL;
    int64_t max_sessions = effective(own[TC_QUOTA_MAX_SESSIONS], d->max_sessions);
    (void)admit_concurrent(own, running, d->max_concurrent, &q);
    int64_t rate = effective(own[TC_QUOTA_RATE_PER_MINUTE], d->tenant_rate_per_minute);
    int64_t cpu = effective(own[TC_QUOTA_CPU_SECONDS_PER_DAY], d->cpu_seconds_per_day);
    int64_t wall = effective(own[TC_QUOTA_WALL_SECONDS_PER_DAY], d->wall_seconds_per_day);
#define OR_NULL(x) ((x) >= 0 ? json_integer(x) : json_null())
    return json_pack(
        "{s:{s:o, s:s, s:I}, s:{s:o, s:s, s:o}, s:{s:o, s:o, s:s, s:f, s:f}, s:{s:o, s:s, s:I}}",
        "concurrent", "max_concurrent", OR_NULL(q.max_concurrent), "source",
        q.own ? "tenant" : "default", "running", (json_int_t)q.running, "rate", "rate_per_minute",
        OR_NULL(rate), "source", own[TC_QUOTA_RATE_PER_MINUTE] >= 0 ? "tenant" : "default",
        "key_rate_per_minute",
        d->key_rate_per_minute > 0 ? json_integer(d->key_rate_per_minute) : json_null(), "daily",
        "cpu_seconds_per_day", OR_NULL(cpu), "wall_seconds_per_day", OR_NULL(wall), "source",
        own[TC_QUOTA_CPU_SECONDS_PER_DAY] >= 0 || own[TC_QUOTA_WALL_SECONDS_PER_DAY] >= 0
            ? "tenant"
            : "default",
        "cpu_seconds_used", (double)cpu_ms / 1000.0, "wall_seconds_used", (double)wall_ms / 1000.0,
        "sessions", "max_sessions", OR_NULL(max_sessions), "source",
        own[TC_QUOTA_MAX_SESSIONS] >= 0 ? "tenant" : "default", "open", (json_int_t)open);
#undef OR_NULL
}
