-- A call held in a session (api/sessions.c, session.held_calls "hold") runs in its session or
-- not at all: when such a row is claimed (queued -> running), the claimer must be the server
-- process that holds the session, and the session must still be open. The server keeps this
-- (the worker never claims a session's call); the database keeps it too, so that a process of
-- an older version during an upgrade, or a bug, cannot run it anywhere else.
CREATE OR REPLACE FUNCTION executions_session_claim_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = NEW.session_id
                   AND s.status = 'active' AND s.instance_id = NEW.claimed_by) THEN
        RAISE EXCEPTION 'execution %: a call of session % runs only in it (claimed by %)',
            NEW.id, NEW.session_id, NEW.claimed_by USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS executions_session_claim_guard ON executions;
CREATE TRIGGER executions_session_claim_guard BEFORE UPDATE ON executions
    FOR EACH ROW
    WHEN (OLD.status = 'queued' AND NEW.status = 'running' AND NEW.session_id IS NOT NULL)
    EXECUTE FUNCTION executions_session_claim_guard();
