-- Reviewer notifications (docs/approvals.md, "Notifications"): when a call is held, and again
-- before its approval expires, each sink its tenant configured is told, through the same
-- outbox as callbacks (webhook_deliveries: leased, retried with backoff, given up after the last
-- attempt). kind says how a row is delivered: 'callback' (the execution's callback_url), a
-- signed JSON 'webhook', a Slack-compatible 'slack' incoming webhook, or 'email' over SMTP
-- (url 'mailto:<address>'; the server's TOOLCAGE_SMTP_URL). A notification carries no code,
-- stdin or file content: what is held, why, until when, and a link to the console (which still
-- asks for a sign-in).
ALTER TABLE webhook_deliveries
    ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'callback'
        CHECK (kind IN ('callback', 'webhook', 'slack', 'email')),
    ADD COLUMN IF NOT EXISTS approval_id uuid REFERENCES approvals(id),
    ADD COLUMN IF NOT EXISTS event text;

CREATE TABLE IF NOT EXISTS tenant_notifications (
    tenant_id              uuid PRIMARY KEY REFERENCES tenants(id),
    sinks                  jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(sinks) = 'array'),
    remind_before_seconds  integer CHECK (remind_before_seconds IS NULL
                                          OR remind_before_seconds BETWEEN 60 AND 604800),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'tenant_notifications');

-- A pending approval is reminded of once (set in the transaction that queues the reminders).
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS reminded_at timestamptz;
CREATE INDEX IF NOT EXISTS approvals_to_remind ON approvals (expires_at)
    WHERE status = 'pending' AND reminded_at IS NULL;
