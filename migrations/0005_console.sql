-- Web console: users (argon2id password hashes), sessions (only a hash of the token is
-- stored) and sign-in attempts (for throttling; every attempt is also in the audit trail).

CREATE TABLE console_users (
    id             uuid PRIMARY KEY,
    tenant_id      uuid NOT NULL REFERENCES tenants(id),
    name           text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    role           text NOT NULL CHECK (role IN ('reviewer', 'auditor', 'admin')),
    password_hash  text NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    created_at     timestamptz NOT NULL DEFAULT now(),
    disabled_at    timestamptz
);
CREATE INDEX console_users_tenant ON console_users (tenant_id);

CREATE TABLE console_sessions (
    token_hash    bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id       uuid NOT NULL REFERENCES console_users(id),
    csrf_token    text NOT NULL,
    source        text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL              -- absolute expiry
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

CREATE TABLE console_signin_attempts (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,                      -- as typed, lower-cased, at most 64 chars
    source      text NOT NULL,
    ok          boolean NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_signin_name ON console_signin_attempts (name, created_at);
CREATE INDEX console_signin_source ON console_signin_attempts (source, created_at);

SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'console_users');
SELECT tc_grant_app('SELECT, INSERT, UPDATE, DELETE', 'console_sessions');
SELECT tc_grant_app('SELECT, INSERT, DELETE', 'console_signin_attempts');
SELECT tc_grant_app('USAGE', 'SEQUENCE console_signin_attempts_id_seq');
