-- The audit records of one execution (GET /v1/executions/{id}/receipt lists them by their chain
-- hashes): found by an index rather than a scan of the whole trail.
CREATE INDEX IF NOT EXISTS audit_execution ON audit_log ((record->>'execution_id'));
