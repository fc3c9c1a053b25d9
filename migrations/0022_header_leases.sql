-- Credentials injected at egress (docs/sandbox.md, "Credentials at egress"): a lease may be
-- delivered as an HTTP header the egress proxy adds to HTTPS requests to one host; its target
-- is "Header@host:port". The value never enters the sandbox.
ALTER TABLE credential_leases DROP CONSTRAINT IF EXISTS credential_leases_delivered_as_check;
ALTER TABLE credential_leases ADD CONSTRAINT credential_leases_delivered_as_check
    CHECK (delivered_as IN ('env', 'file', 'header'));
