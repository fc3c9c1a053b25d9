-- Operators, persons, and the audit chain's second format (see docs/audit.md).

-- Operator keys act on the service as a whole (every tenant's audit trail, policy reload):
-- they belong to no tenant. Only `toolcage keys create --role operator` makes one.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('agent', 'reviewer', 'auditor', 'admin', 'operator'));
ALTER TABLE api_keys ALTER COLUMN tenant_id DROP NOT NULL;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_operator_no_tenant
    CHECK ((role = 'operator') = (tenant_id IS NULL));

-- A person of a tenant: the API keys and console users bound to one person count once when
-- approvals are counted (and a person cannot approve what one of their keys asked for).
CREATE TABLE persons (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants(id),
    name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
ALTER TABLE api_keys ADD COLUMN person_id uuid REFERENCES persons(id);
ALTER TABLE console_users ADD COLUMN person_id uuid REFERENCES persons(id);
-- Console users made before persons existed are each the person of their name.
INSERT INTO persons (id, tenant_id, name)
    SELECT gen_random_uuid(), u.tenant_id, u.name FROM console_users u
    ON CONFLICT (tenant_id, name) DO NOTHING;
UPDATE console_users u SET person_id = p.id
    FROM persons p WHERE p.tenant_id = u.tenant_id AND p.name = u.name;

SELECT tc_grant_app('SELECT, INSERT', 'persons');

-- Sign-in throttling counts an attempt as a failure when it is let through, and turns it into
-- a success once the password checked out (console/session.c).
SELECT tc_grant_app('UPDATE', 'console_signin_attempts');

-- The audit chain, second format: digest = BLAKE2b(canonical record), hash =
-- BLAKE2b(prev_hash || digest), and a keyed authentication code (mac) under a key derived
-- from the master key named by mac_key_id. Records before v2_from keep the first format.
-- No appender may run while the boundary is fixed.
LOCK TABLE audit_head, audit_log IN ACCESS EXCLUSIVE MODE;
ALTER TABLE audit_log ADD COLUMN digest bytea CHECK (length(digest) = 32);
ALTER TABLE audit_log ADD COLUMN mac bytea CHECK (length(mac) = 32);
ALTER TABLE audit_log ADD COLUMN mac_key_id text CHECK (mac_key_id ~ '^[0-9a-f]{16}$');

CREATE TABLE audit_chain (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    v2_from  bigint NOT NULL CHECK (v2_from > 0)
);
INSERT INTO audit_chain (one, v2_from) SELECT true, seq + 1 FROM audit_head;

DO $$
BEGIN
    EXECUTE format('ALTER TABLE audit_log ADD CONSTRAINT audit_log_v2_sealed CHECK (seq < %s'
                   ' OR (digest IS NOT NULL AND mac IS NOT NULL AND mac_key_id IS NOT NULL))',
                   (SELECT v2_from FROM audit_chain));
END $$;

CREATE FUNCTION audit_chain_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit chain boundary is fixed (% on %)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_chain_fixed BEFORE INSERT OR UPDATE OR DELETE ON audit_chain
    FOR EACH ROW EXECUTE FUNCTION audit_chain_refuse_change();
CREATE TRIGGER audit_chain_no_truncate BEFORE TRUNCATE ON audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION audit_chain_refuse_change();

SELECT tc_grant_app('SELECT', 'audit_chain');
