-- Approval gate: held executions, their approval requests and every decision; the
-- instances that claim work; idempotency keys; webhook deliveries.

ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN (
    'pending_approval', 'queued', 'running', 'completed', 'failed', 'timeout', 'killed',
    'error', 'denied', 'expired', 'cancelled'));
-- The server process that runs (or ran) the execution; see instances.
ALTER TABLE executions ADD COLUMN claimed_by integer;
ALTER TABLE executions ADD COLUMN callback_url text;
CREATE INDEX executions_queued ON executions (created_at) WHERE status = 'queued';
CREATE INDEX executions_running ON executions (claimed_by) WHERE status = 'running';

-- One row per server process. A live process holds the advisory lock (7715, id) on a
-- connection of its own for as long as it runs; an execution claimed by an instance whose
-- lock is free was interrupted by a crash.
CREATE TABLE instances (
    id          serial PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT now(),
    hostname    text
);

CREATE TABLE approvals (
    id                  uuid PRIMARY KEY,
    tenant_id           uuid NOT NULL REFERENCES tenants(id),
    execution_id        uuid NOT NULL UNIQUE REFERENCES executions(id),
    tool                text NOT NULL,
    tier                text NOT NULL,
    reasons             jsonb NOT NULL,        -- why it is held: ["tier:human_approve", "prescreen:high", ...]
    payload             jsonb NOT NULL,        -- exactly what will run
    payload_hash        bytea NOT NULL CHECK (length(payload_hash) = 32),
    requester_key_id    uuid REFERENCES api_keys(id),
    findings            jsonb NOT NULL DEFAULT '[]',
    required_approvals  integer NOT NULL CHECK (required_approvals BETWEEN 1 AND 10),
    status              text NOT NULL CHECK (status IN ('pending', 'approved', 'denied',
                                                        'expired', 'cancelled')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    decided_at          timestamptz
);
CREATE INDEX approvals_tenant_status ON approvals (tenant_id, status, created_at);
CREATE INDEX approvals_pending_expiry ON approvals (expires_at) WHERE status = 'pending';

CREATE TABLE approval_decisions (
    id           uuid PRIMARY KEY,
    approval_id  uuid NOT NULL REFERENCES approvals(id),
    decider      text NOT NULL,               -- "key:<uuid>" or "user:<name>"
    decision     text NOT NULL CHECK (decision IN ('approve', 'deny')),
    reason       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (approval_id, decider),
    CHECK (decision = 'approve' OR length(coalesce(reason, '')) > 0)
);

CREATE TABLE idempotency_keys (
    tenant_id     uuid NOT NULL REFERENCES tenants(id),
    key           text NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer,                     -- NULL while the first request is in flight
    response      jsonb,
    location      text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    execution_id     uuid NOT NULL REFERENCES executions(id),
    url              text NOT NULL,
    body             jsonb NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    last_error       text
);
CREATE INDEX webhook_due ON webhook_deliveries (next_attempt_at) WHERE delivered_at IS NULL;

SELECT tc_grant_app('SELECT, INSERT', 'instances');
SELECT tc_grant_app('USAGE', 'SEQUENCE instances_id_seq');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'approvals');
SELECT tc_grant_app('SELECT, INSERT', 'approval_decisions');
SELECT tc_grant_app('SELECT, INSERT, UPDATE, DELETE', 'idempotency_keys');
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'webhook_deliveries');
