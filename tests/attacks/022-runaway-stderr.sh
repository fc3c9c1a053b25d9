# attack: flood stderr instead of stdout (both streams are capped)
# limits: {"output_bytes": 4096, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=output
# expect: stderr_truncated=true
#   In a session the output cap cuts a call's output instead of killing the program
#   (docs/sessions.md, Limits): `exec` replaces the session's shell with yes, which floods
#   unseen until the call's timeout interrupts it (SIGINT), and that ends the session.
# session-limits: {"output_bytes": 4096, "timeout_ms": 3000}
# session-expect: status=timeout
# session-expect: killed_reason=timeout
# session-expect: signal=SIGINT
# session-expect: stderr_truncated=true
# session-expect: stderr!~=^[\s\S]{4097}
exec yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA >&2
