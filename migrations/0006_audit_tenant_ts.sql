-- Time-window queries of one tenant ("since/until") used the global ts index and discarded
-- other tenants' rows; this index serves them directly (p95 96 ms -> see bench/README.md).
CREATE INDEX audit_tenant_ts ON audit_log (tenant_id, ts);
