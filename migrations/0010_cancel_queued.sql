-- Cancelling an approved call before a server claims it (POST /v1/executions/{id}/cancel,
-- execution/cancel.c): one more transition of the state machine of 0008,
--   queued -> cancelled (never claimed, never started)
-- A running call is cancelled by killing its sandbox; its outcome (status cancelled, with a
-- result) is the running -> final transition that 0008 already allows.
CREATE OR REPLACE FUNCTION executions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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
             OR (OLD.status = 'queued' AND NEW.status = 'cancelled' AND NEW.claimed_by IS NULL
                 AND NEW.code_started_at IS NULL)
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
