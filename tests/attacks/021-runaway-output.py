# attack: print forever to flood the caller and the launcher
# limits: {"output_bytes": 65536, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=output
# expect: stdout_truncated=true
import os
buf = b"A" * 65536
while True:
    os.write(1, buf)
