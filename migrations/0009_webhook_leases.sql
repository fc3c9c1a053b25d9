-- Webhook deliveries leave the worker's transaction: a delivery thread of each server
-- process claims due rows with a lease (FOR UPDATE SKIP LOCKED, then lease_until), delivers
-- them outside any transaction, and records the outcome in one statement. attempts counts
-- started attempts (claimed), so that a process that dies while delivering still uses one up;
-- a row past its last attempt is given up (gave_up_at) instead of being left due for ever.
ALTER TABLE webhook_deliveries
    ADD COLUMN lease_until      timestamptz, -- claimed until then by leased_by
    ADD COLUMN leased_by        integer,     -- instances.id of the claiming process
    ADD COLUMN last_attempt_at  timestamptz,
    ADD COLUMN last_status      integer,     -- HTTP status of the last answer, NULL for none
    ADD COLUMN gave_up_at       timestamptz; -- no attempt left

DROP INDEX webhook_due;
CREATE INDEX webhook_due ON webhook_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
-- Deliveries in flight, counted per tenant for the per-tenant cap.
CREATE INDEX webhook_leased ON webhook_deliveries (lease_until)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL AND lease_until IS NOT NULL;
CREATE INDEX webhook_execution ON webhook_deliveries (execution_id);
