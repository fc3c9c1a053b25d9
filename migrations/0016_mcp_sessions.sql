-- MCP sessions (api/mcp.c): the Mcp-Session-Id that initialize gives a client, bound to the API
-- key that asked for it; it lapses after a day without use, or ends with DELETE /mcp. The
-- toolcage session each session tool has in the conversation (one per tool, replaced when it
-- ended), so that state persists between the model's calls.
CREATE TABLE IF NOT EXISTS mcp_sessions (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants(id),
    api_key_id   uuid NOT NULL REFERENCES api_keys(id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz
);
CREATE INDEX IF NOT EXISTS mcp_sessions_tenant ON mcp_sessions (tenant_id, created_at DESC);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'mcp_sessions');

CREATE TABLE IF NOT EXISTS mcp_session_tools (
    mcp_session_id uuid NOT NULL REFERENCES mcp_sessions(id),
    tool           text NOT NULL,
    session_id     uuid NOT NULL REFERENCES sessions(id),
    PRIMARY KEY (mcp_session_id, tool)
);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'mcp_session_tools');
