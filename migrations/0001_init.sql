-- Tenants, API keys and executions. Every row a tenant owns carries tenant_id,
-- and every query filters by it.

-- Grants to the runtime role: the migration runner sets toolcage.app_role to the user
-- of TOOLCAGE_DATABASE_URL; when it is the schema owner itself, nothing is granted.
CREATE FUNCTION tc_grant_app(privileges text, objects text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    app text := current_setting('toolcage.app_role', true);
BEGIN
    IF app IS NOT NULL AND app <> '' AND app <> current_user THEN
        EXECUTE format('GRANT %s ON %s TO %I', privileges, objects, app);
    END IF;
END $$;

CREATE TABLE tenants (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants(id),
    role        text NOT NULL CHECK (role IN ('agent', 'reviewer', 'auditor', 'admin')),
    key_hash    bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    prefix      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE executions (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants(id),
    api_key_id   uuid REFERENCES api_keys(id),
    tool         text NOT NULL,
    status       text NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed',
                                                 'timeout', 'killed', 'error')),
    request      jsonb NOT NULL,
    limits       jsonb NOT NULL,
    result       jsonb,
    request_id   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz
);
CREATE INDEX executions_tenant_created ON executions (tenant_id, created_at DESC);

SELECT tc_grant_app('SELECT, INSERT', 'tenants');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'api_keys');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'executions');
