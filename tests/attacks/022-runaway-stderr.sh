# attack: flood stderr instead of stdout (both streams are capped)
# limits: {"output_bytes": 4096, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=output
# expect: stderr_truncated=true
exec yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA >&2
