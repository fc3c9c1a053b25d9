-- GET /v1/executions (api/executions.c): a tenant's executions newest first, paged by id
-- (UUIDv7, time-ordered), so a page is an index range scan whatever the table's size.
CREATE INDEX IF NOT EXISTS executions_tenant_id_desc ON executions (tenant_id, id DESC);
