-- Per-tenant quotas (execution/quota.c). max_concurrent: executions of the tenant running at
-- once (NULL: the server's TOOLCAGE_TENANT_MAX_CONCURRENT; 0: none may run). Admission counts
-- the tenant's running rows under a per-tenant advisory lock, so every replica enforces the
-- same number: the database decides.
CREATE TABLE IF NOT EXISTS tenant_quotas (
    tenant_id      uuid PRIMARY KEY REFERENCES tenants(id),
    max_concurrent int CHECK (max_concurrent IS NULL OR max_concurrent >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'tenant_quotas');
CREATE INDEX IF NOT EXISTS executions_tenant_running ON executions (tenant_id)
    WHERE status = 'running';
