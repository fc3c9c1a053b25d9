-- Sessions (server/sessions.c, docs/sessions.md): a sandbox that stays up for a tenant's calls.
-- One row per session, kept after it ended (ended_reason says how). A session lives on the
-- server process that started it (instance_id); when that instance is declared dead, the
-- sweeper ends its sessions with ended_reason 'server_restart'. A call in a session is an
-- execution like any other, with its session_id.
CREATE TABLE IF NOT EXISTS sessions (
    id                   uuid PRIMARY KEY,
    tenant_id            uuid NOT NULL REFERENCES tenants(id),
    api_key_id           uuid REFERENCES api_keys(id),
    tool                 text NOT NULL,
    status               text NOT NULL CHECK (status IN ('active', 'ended')),
    instance_id          int NOT NULL,
    limits               jsonb NOT NULL,
    ttl_seconds          int NOT NULL CHECK (ttl_seconds > 0),
    idle_timeout_seconds int NOT NULL CHECK (idle_timeout_seconds > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL,
    last_used_at         timestamptz NOT NULL DEFAULT now(),
    calls                int NOT NULL DEFAULT 0,
    ended_at             timestamptz,
    ended_reason         text CHECK (ended_reason IN ('deleted', 'idle_timeout', 'ttl_expired',
                                     'exited', 'killed', 'call_unresponsive', 'server_shutdown',
                                     'server_restart', 'error')),
    CHECK ((status = 'ended') = (ended_at IS NOT NULL AND ended_reason IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS sessions_tenant_created ON sessions (tenant_id, created_at DESC);
CREATE INDEX IF NOT EXISTS sessions_open ON sessions (tenant_id) WHERE status = 'active';
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'sessions');

ALTER TABLE executions ADD COLUMN IF NOT EXISTS session_id uuid REFERENCES sessions(id);
CREATE INDEX IF NOT EXISTS executions_session ON executions (session_id, created_at)
    WHERE session_id IS NOT NULL;

-- Open sessions per tenant (NULL: the server's TOOLCAGE_TENANT_MAX_SESSIONS).
ALTER TABLE tenant_quotas ADD COLUMN IF NOT EXISTS max_sessions int
    CHECK (max_sessions IS NULL OR max_sessions >= 0);
