-- Live output of a running call for readers on another replica (api/stream.c): when one
-- follows an execution that runs elsewhere (GET /v1/executions/{id}/events), it asks with
-- NOTIFY toolcage_follow; the replica that runs it writes the call's output events here as it
-- pushes them (already redacted, exactly what its own readers get), and removes them once the
-- outcome is stored (the worker's sweep removes what a dead replica left). Rows are events:
-- the stream, the text, and the event's id (bytes of stdout and stderr text after it).
CREATE TABLE IF NOT EXISTS execution_output (
    execution_id uuid NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    stream       text NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    text         text NOT NULL,
    out_bytes    bigint NOT NULL,
    err_bytes    bigint NOT NULL,
    written_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, seq)
);
SELECT tc_grant_app('SELECT, INSERT, DELETE', 'execution_output');
