-- Ask on egress (docs/approvals.md, "Ask on egress"): a tool whose policy says
-- "network": {"allow": [...], "ask": true} has a connection to a host its list does not name held
-- at the egress proxy while a reviewer answers: allow it once, allow host:port for the rest of the
-- execution, or deny. No answer before expires_at is a deny (the proxy's own clock; the row is
-- marked expired). A row is written by the server whose launcher runs the execution; a decision
-- may come from any replica or the console. Not an approval of the execution itself: allowing a
-- connection starts nothing.
CREATE TABLE IF NOT EXISTS egress_asks (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants(id),
    execution_id  uuid NOT NULL REFERENCES executions(id),
    ask           integer NOT NULL CHECK (ask BETWEEN 0 AND 1000),
    tool          text NOT NULL,
    host          text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
    port          integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    status        text NOT NULL CHECK (status IN ('pending', 'allowed_once', 'allowed_execution',
                                                  'denied', 'expired', 'withdrawn')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    decided_at    timestamptz,
    decider       text,
    reason        text CHECK (reason IS NULL OR length(reason) <= 1000),
    UNIQUE (execution_id, ask)
);
CREATE INDEX IF NOT EXISTS egress_asks_tenant_status ON egress_asks (tenant_id, status, created_at);
CREATE INDEX IF NOT EXISTS egress_asks_pending_expiry ON egress_asks (expires_at)
    WHERE status = 'pending';
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'egress_asks');

-- A reviewer notice of an ask (docs/approvals.md, "Notifications") is a row of the outbox like
-- an approval's; one whose ask is no longer pending is given up.
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS ask_id uuid REFERENCES egress_asks(id);
