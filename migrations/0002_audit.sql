-- The audit trail: one row per consequential event, hash-chained, append-only.
-- The record (jsonb) is the only source of truth; the query columns are generated from it,
-- so they cannot drift from what was hashed.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE audit_log (
    seq        bigint PRIMARY KEY CHECK (seq > 0),
    record     jsonb NOT NULL,
    hash       bytea NOT NULL CHECK (length(hash) = 32),
    ts         text GENERATED ALWAYS AS (record->>'ts') STORED,
    tenant_id  text GENERATED ALWAYS AS (record->>'tenant_id') STORED,
    actor      text GENERATED ALWAYS AS (record->'actor'->>'id') STORED,
    action     text GENERATED ALWAYS AS (record->>'action') STORED,
    tool       text GENERATED ALWAYS AS (record->>'tool') STORED,
    status     text GENERATED ALWAYS AS (record->>'status') STORED,
    search     text GENERATED ALWAYS AS (coalesce(record->>'tool', '') || ' ' ||
                                         coalesce(record->'actor'->>'name', '') || ' ' ||
                                         coalesce(record->'actor'->>'id', '') || ' ' ||
                                         coalesce(record->>'reason', '')) STORED
);
CREATE INDEX audit_tenant_seq ON audit_log (tenant_id, seq DESC);
CREATE INDEX audit_tenant_action_seq ON audit_log (tenant_id, action, seq DESC);
CREATE INDEX audit_tenant_tool_seq ON audit_log (tenant_id, tool, seq DESC);
CREATE INDEX audit_tenant_actor_seq ON audit_log (tenant_id, actor, seq DESC);
CREATE INDEX audit_tenant_status_seq ON audit_log (tenant_id, status, seq DESC);
CREATE INDEX audit_ts ON audit_log (ts);
CREATE INDEX audit_search_trgm ON audit_log USING gin (search gin_trgm_ops);

-- The head of the chain: one row, locked by every writer, so that sequence numbers are
-- gap-free and each record names its true predecessor.
CREATE TABLE audit_head (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq   bigint NOT NULL,
    hash  bytea NOT NULL CHECK (length(hash) = 32)
);
INSERT INTO audit_head (one, seq, hash) VALUES (true, 0, decode(repeat('00', 32), 'hex'));

-- Signed checkpoints of (seq, hash, ts): cutting records off the tail before the last
-- checkpoint is detectable even by someone who can rewrite the whole table.
CREATE TABLE audit_checkpoints (
    seq        bigint PRIMARY KEY,
    hash       bytea NOT NULL CHECK (length(hash) = 32),
    ts         text NOT NULL,
    key_id     text NOT NULL,
    signature  bytea NOT NULL CHECK (length(signature) = 64)
);

-- Public halves of the checkpoint signing keys, by key id (kept across master-key rotations).
CREATE TABLE audit_keys (
    key_id      text PRIMARY KEY,
    public_key  bytea NOT NULL CHECK (length(public_key) = 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only (% on %)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

-- The runtime role may only append and read the trail.
SELECT tc_grant_app('SELECT, INSERT', 'audit_log');
SELECT tc_grant_app('SELECT, INSERT', 'audit_checkpoints');
SELECT tc_grant_app('SELECT, INSERT', 'audit_keys');
SELECT tc_grant_app('SELECT, UPDATE', 'audit_head');
