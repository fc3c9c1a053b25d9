/* Per-tenant quotas, decided by the database so that every replica enforces the same numbers
 * (migrations/0012_tenant_quotas.sql, 0013_rate_limits.sql): executions running at once per
 * tenant, and calls per minute per tenant and per API key (token buckets). */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

struct tc_keys;
struct tc_config;

/* The tenant's limit: its own (tenant_quotas), else default_max; -1 for no limit. */
struct tc_quota {
    int64_t max_concurrent; /* -1: none */
    bool own;               /* set for this tenant, not the server's default */
    int64_t running;        /* executions of the tenant running now */
};

/* The server's defaults (the configuration table); 0: no limit. */
struct tc_quota_defaults {
    int64_t max_concurrent;
    int64_t tenant_rate_per_minute;
    int64_t key_rate_per_minute;
    int64_t cpu_seconds_per_day;
    int64_t wall_seconds_per_day;
    int64_t max_sessions;
};

/* The defaults of the configuration (TOOLCAGE_TENANT_*, TOOLCAGE_KEY_RATE_PER_MINUTE). */
struct tc_quota_defaults tc_quota_defaults_of(const struct tc_config *cfg);

/* A tenant's own limits, as tenant_quotas holds them: TC_QUOTA_DEFAULT where none is set. In
 * tc_quota_set also TC_QUOTA_KEEP (leave it as it is). */
enum tc_quota_limit {
    TC_QUOTA_MAX_CONCURRENT,
    TC_QUOTA_RATE_PER_MINUTE,
    TC_QUOTA_CPU_SECONDS_PER_DAY,
    TC_QUOTA_WALL_SECONDS_PER_DAY,
    TC_QUOTA_MAX_SESSIONS,
    TC_QUOTA__COUNT
};
extern const char *const tc_quota_limit_names[TC_QUOTA__COUNT]; /* the API's and the column's */
extern const int64_t tc_quota_limit_max[TC_QUOTA__COUNT];

/* What refused a call: the limit's name and, for a rate, the seconds until a token. */
struct tc_quota_refusal {
    const char *limit; /* a tc_quota_limit_names entry, or "key_rate_per_minute" */
    int64_t value;     /* the limit */
    int64_t running;   /* max_concurrent: the tenant's running executions; a budget: used s */
    int64_t retry_after_s;
    bool own; /* the tenant's own limit, not the server's default */
};

/* Inside a transaction of c, before one execution of tenant_id by key_id is recorded as
 * running: the concurrency quota (tc_quota_admit_tx), then one token from the tenant's and the
 * key's rate buckets. 0, -EDQUOT (*ret says which limit), -EIO. A refusal rolls nothing back:
 * the caller's ROLLBACK does (tokens taken in this transaction are returned with it). */
int tc_quota_admit_call_tx(PGconn *c, const char *tenant_id, const char *key_id,
                           const struct tc_quota_defaults *d, struct tc_quota_refusal *ret);

/* Inside a transaction of c, before an execution of tenant_id is recorded as running: takes
 * the tenant's admission lock (held to the end of the transaction, so a concurrent admission
 * anywhere counts this one), then compares. default_max 0: no limit unless the tenant has
 * one. 0 (admit), -EDQUOT (refuse; *ret says why), -EIO. */
int tc_quota_admit_tx(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret);

/* Inside a transaction of c, before a session of tenant_id is recorded as active: the
 * tenant's open sessions against its max_sessions (tenant_quotas, else d->max_sessions; 0:
 * none), under the tenant's admission lock. 0, -EDQUOT (*ret: limit "max_sessions"), -EIO. */
int tc_quota_admit_session_tx(PGconn *c, const char *tenant_id, const struct tc_quota_defaults *d,
                              struct tc_quota_refusal *ret);

#define TC_QUOTA_KEEP    (-2) /* tc_quota_set: leave this limit as it is */
#define TC_QUOTA_DEFAULT (-1) /* tc_quota_set: back to the server's default */

/* Set (>= 0), clear (TC_QUOTA_DEFAULT) or keep (TC_QUOTA_KEEP) each of the tenant's limits,
 * with a `tenant.quota_set` audit record naming the actor (borrowed) and what changed, in one
 * transaction. 0 or -EIO. */
int tc_quota_set(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                 const int64_t limits[TC_QUOTA__COUNT], json_t *actor);

/* Inside the transaction that stores an outcome: add its CPU and wall time to the tenant's
 * use of this hour. true on success. */
bool tc_quota_add_usage_tx(PGconn *c, const char *tenant_id, int64_t cpu_ms, int64_t wall_ms);

/* The tenant's limits and use as the API shows them:
 * {concurrent: {max_concurrent, source, running}, rate: {rate_per_minute, source,
 *  key_rate_per_minute}, daily: {cpu_seconds_per_day, wall_seconds_per_day, source,
 *  cpu_seconds_used, wall_seconds_used}, sessions: {max_sessions, source, open}}. NULL on a
 * database error. */
json_t *tc_quota_describe(PGconn *c, const char *tenant_id, const struct tc_quota_defaults *d);
