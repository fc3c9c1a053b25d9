-- Executions as a state machine kept by PostgreSQL itself (docs/approvals.md, "Faults"):
--   insert  -> pending_approval (held) | running (claimed by the inserting instance)
--   pending_approval -> queued | denied | expired | cancelled
--   queued  -> running (a claim: claimed_by set)
--   running -> completed | failed | timeout | killed | error (with a result)
--   running -> queued (a requeue: only while the code was never released to run)
-- A terminal row never changes its outcome again; a result that arrives after the row was
-- closed (a sweeper marked it interrupted) is kept once in late_result, next to it.

-- When the sandbox was released to run the code (the `execution.start` record commits with
-- it, before the launcher is told to go). NULL: the code never began.
ALTER TABLE executions ADD COLUMN code_started_at timestamptz;
-- An approved call interrupted after it started: it may have had its effect; a human must look.
ALTER TABLE executions ADD COLUMN needs_review boolean NOT NULL DEFAULT false;
-- Claims so far (a call interrupted before it started is requeued, a bounded number of times).
ALTER TABLE executions ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN late_result jsonb;
CREATE INDEX executions_needs_review ON executions (tenant_id, created_at DESC) WHERE needs_review;

CREATE FUNCTION executions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    final constant text[] := ARRAY['completed', 'failed', 'timeout', 'killed', 'error',
                                   'denied', 'expired', 'cancelled'];
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status NOT IN ('pending_approval', 'running')
           OR (NEW.status = 'running') <> (NEW.claimed_by IS NOT NULL)
           OR NEW.code_started_at IS NOT NULL OR NEW.late_result IS NOT NULL THEN
            RAISE EXCEPTION 'execution %: cannot be created as %', NEW.id, NEW.status
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.status = ANY (final) THEN
        IF NEW.status IS DISTINCT FROM OLD.status OR NEW.result IS DISTINCT FROM OLD.result
           OR NEW.finished_at IS DISTINCT FROM OLD.finished_at
           OR NEW.claimed_by IS DISTINCT FROM OLD.claimed_by
           OR NEW.code_started_at IS DISTINCT FROM OLD.code_started_at
           OR (OLD.late_result IS NOT NULL AND NEW.late_result IS DISTINCT FROM OLD.late_result) THEN
            RAISE EXCEPTION 'execution %: % is final', OLD.id, OLD.status
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.late_result IS NOT NULL THEN
        RAISE EXCEPTION 'execution %: a late result needs a final row', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.code_started_at IS DISTINCT FROM OLD.code_started_at
       AND (OLD.code_started_at IS NOT NULL OR OLD.status <> 'running') THEN
        RAISE EXCEPTION 'execution %: starts once, while running', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        IF NOT ((OLD.status = 'pending_approval'
                 AND NEW.status IN ('queued', 'denied', 'expired', 'cancelled')
                 AND NEW.claimed_by IS NOT DISTINCT FROM OLD.claimed_by)
             OR (OLD.status = 'queued' AND NEW.status = 'running' AND NEW.claimed_by IS NOT NULL)
             OR (OLD.status = 'running' AND NEW.status = ANY (final) AND NEW.result IS NOT NULL
                 AND NEW.claimed_by IS NOT DISTINCT FROM OLD.claimed_by)
             OR (OLD.status = 'running' AND NEW.status = 'queued' AND NEW.code_started_at IS NULL
                 AND NEW.claimed_by IS NULL)) THEN
            RAISE EXCEPTION 'execution %: % -> % is not a transition', OLD.id, OLD.status,
                NEW.status USING ERRCODE = 'check_violation';
        END IF;
    ELSIF NEW.claimed_by IS DISTINCT FROM OLD.claimed_by THEN
        RAISE EXCEPTION 'execution %: claimed_by changes only with a claim', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER executions_guard BEFORE INSERT OR UPDATE ON executions
    FOR EACH ROW EXECUTE FUNCTION executions_guard();

-- Liveness of server processes beside their advisory lock: a live process refreshes
-- heartbeat_at every half second on its lock connection. A sweeper closes the executions of
-- an instance only when its lock is free AND it has been silent for the grace period (counted
-- from the database's own start too, so that a PostgreSQL restart, which drops every lock at
-- once, does not make live processes look dead), and marks it dead_at first: a process that
-- comes back after that is fenced and registers anew.
ALTER TABLE instances ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE instances ADD COLUMN dead_at timestamptz;
SELECT tc_grant_app('UPDATE', 'instances');

-- Exactly one outcome record per execution, and at most one start. Records written before
-- this migration that already break the rule (the bug this fixes) are left as they are, out
-- of the index's reach: the audit trail is append-only.
DO $$
DECLARE
    bound bigint;
BEGIN
    SELECT coalesce(max(seq), 0) INTO bound FROM audit_log
     WHERE action IN ('execution.complete', 'execution.interrupted', 'execution.refused',
                      'approval.denied', 'approval.expired', 'approval.cancelled')
       AND record->>'execution_id' IN (
           SELECT record->>'execution_id' FROM audit_log
            WHERE action IN ('execution.complete', 'execution.interrupted', 'execution.refused',
                             'approval.denied', 'approval.expired', 'approval.cancelled')
            GROUP BY 1 HAVING count(*) > 1);
    EXECUTE format('CREATE UNIQUE INDEX audit_one_outcome ON audit_log ((record->>''execution_id''))'
                   ' WHERE action IN (''execution.complete'', ''execution.interrupted'','
                   ' ''execution.refused'', ''approval.denied'', ''approval.expired'','
                   ' ''approval.cancelled'') AND seq > %s', bound);
END $$;
CREATE UNIQUE INDEX audit_one_start ON audit_log ((record->>'execution_id'))
    WHERE action = 'execution.start';
