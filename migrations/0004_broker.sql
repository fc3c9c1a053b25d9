-- Credential broker: sealed secrets, the leases that hand them to one execution, scoped
-- tokens, and the public halves of every token signing key (see docs/credentials.md).

-- A secret's value exists here only as an XChaCha20-Poly1305 ciphertext whose associated
-- data is (tenant_id, name): a ciphertext copied into another row does not open.
-- key_id names the master key that sealed it (rotation re-seals row by row).
CREATE TABLE secrets (
    tenant_id        uuid NOT NULL REFERENCES tenants(id),
    name             text NOT NULL CHECK (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$'),
    ciphertext       bytea NOT NULL CHECK (length(ciphertext) >= 16),
    nonce            bytea NOT NULL CHECK (length(nonce) = 24),
    key_id           text NOT NULL CHECK (key_id ~ '^[0-9a-f]{16}$'),
    description      text NOT NULL DEFAULT '',
    allowed_tools    text[] NOT NULL DEFAULT '{}',
    max_ttl_seconds  integer NOT NULL CHECK (max_ttl_seconds BETWEEN 1 AND 86400),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
CREATE INDEX secrets_key_id ON secrets (key_id);

-- One row per secret granted to one execution. Handed out only while neither expired nor
-- revoked; revoked when the execution ends.
CREATE TABLE credential_leases (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants(id),
    execution_id  uuid NOT NULL,
    tool          text NOT NULL,
    secret_name   text NOT NULL,
    delivered_as  text NOT NULL CHECK (delivered_as IN ('env', 'file')),
    target        text NOT NULL,
    issued_at     timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    revoked_at    timestamptz,
    revoke_reason text
);
CREATE INDEX credential_leases_execution ON credential_leases (execution_id);
CREATE INDEX credential_leases_secret ON credential_leases (tenant_id, secret_name)
    WHERE revoked_at IS NULL;

-- Scoped tokens (PASETO v4.public). The token itself is never stored: introspection
-- verifies its signature and then looks its id (jti) up here for revocation.
CREATE TABLE credential_tokens (
    id             uuid PRIMARY KEY,
    tenant_id      uuid NOT NULL REFERENCES tenants(id),
    tool           text NOT NULL,
    execution_id   uuid,
    audience       text NOT NULL,
    scope          text NOT NULL,
    key_id         text NOT NULL,
    issuer_key_id  uuid REFERENCES api_keys(id),
    issued_at      timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    revoke_reason  text
);
CREATE INDEX credential_tokens_execution ON credential_tokens (execution_id)
    WHERE execution_id IS NOT NULL;
CREATE INDEX credential_tokens_tenant ON credential_tokens (tenant_id, issued_at DESC);

-- Public token keys by key id, kept across master-key rotations so that tokens signed
-- before a rotation still verify offline and online until they expire.
CREATE TABLE token_keys (
    key_id      text PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{16}$'),
    public_key  bytea NOT NULL CHECK (length(public_key) = 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

SELECT tc_grant_app('SELECT, INSERT, UPDATE, DELETE', 'secrets');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'credential_leases');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'credential_tokens');
SELECT tc_grant_app('SELECT, INSERT', 'token_keys');
