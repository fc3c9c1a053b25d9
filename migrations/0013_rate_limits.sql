-- Request rates (execution/quota.c): a token bucket per tenant and per API key, kept in
-- PostgreSQL so every replica draws from the same bucket. A bucket holds up to its per-minute
-- rate and refills continuously; one execution takes one token.
ALTER TABLE tenant_quotas ADD COLUMN IF NOT EXISTS rate_per_minute int
    CHECK (rate_per_minute IS NULL OR rate_per_minute >= 0);
CREATE TABLE IF NOT EXISTS rate_buckets (
    scope      text PRIMARY KEY,          -- "tenant:<uuid>" or "key:<uuid>"
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
);
SELECT tc_grant_app('SELECT, INSERT, UPDATE', 'rate_buckets');
