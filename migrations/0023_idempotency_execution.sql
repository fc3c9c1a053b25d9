-- Idempotency-Key (docs/approvals.md, Idempotency): the execution a key's first request
-- recorded, set in the same transaction as the execution's row. A repeat that finds the key
-- still without its answer (the first request's process died, or its answer was lost) is
-- pointed at that execution instead of running the call again.
ALTER TABLE idempotency_keys ADD COLUMN execution_id uuid REFERENCES executions(id);
