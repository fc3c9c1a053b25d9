/* Per-tenant quotas, decided by the database so that every replica enforces the same numbers
 * (migrations/0012_tenant_quotas.sql). Today: executions running at once per tenant. */
#pragma once
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

struct tc_keys;

/* The tenant's limit: its own (tenant_quotas), else default_max; -1 for no limit. */
struct tc_quota {
    int64_t max_concurrent; /* -1: none */
    bool own;               /* set for this tenant, not the server's default */
    int64_t running;        /* executions of the tenant running now */
};

/* Inside a transaction of c, before an execution of tenant_id is recorded as running: takes
 * the tenant's admission lock (held to the end of the transaction, so a concurrent admission
 * anywhere counts this one), then compares. default_max 0: no limit unless the tenant has
 * one. 0 (admit), -EDQUOT (refuse; *ret says why), -EIO. */
int tc_quota_admit_tx(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret);

/* The tenant's limits and use. 0 or -EIO. */
int tc_quota_get(PGconn *c, const char *tenant_id, int64_t default_max, struct tc_quota *ret);

/* Set (max_concurrent >= 0) or clear (-1: the server's default) the tenant's limit, with a
 * `tenant.quota_set` audit record naming the actor (borrowed), in one transaction. 0 or -EIO. */
int tc_quota_set(PGconn *c, const struct tc_keys *keys, const char *tenant_id,
                 int64_t max_concurrent, json_t *actor);

/* {max_concurrent: N|null, source: "tenant"|"default", running: N} */
json_t *tc_quota_json(const struct tc_quota *q);
