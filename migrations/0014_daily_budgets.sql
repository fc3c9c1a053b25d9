-- Daily budgets (execution/quota.c): CPU and wall seconds a tenant's executions may use in a
-- rolling day. Use is added up per hour when an outcome is stored (execution/record.c), in the
-- same transaction, and admission sums the last 24 hours.
ALTER TABLE tenant_quotas ADD COLUMN IF NOT EXISTS cpu_seconds_per_day int
    CHECK (cpu_seconds_per_day IS NULL OR cpu_seconds_per_day >= 0);
ALTER TABLE tenant_quotas ADD COLUMN IF NOT EXISTS wall_seconds_per_day int
    CHECK (wall_seconds_per_day IS NULL OR wall_seconds_per_day >= 0);
CREATE TABLE IF NOT EXISTS tenant_usage (
    tenant_id uuid NOT NULL REFERENCES tenants(id),
    hour      timestamptz NOT NULL,
    cpu_ms    bigint NOT NULL DEFAULT 0,
    wall_ms   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, hour)
);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'tenant_usage');
