# attack: print forever to flood the caller and the launcher
# limits: {"output_bytes": 65536, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=output
# expect: stdout_truncated=true
#   In a session the output cap cuts a call's output instead of killing the program
#   (docs/sessions.md, Limits): the flood goes on, unseen, until the call's timeout interrupts
#   it (KeyboardInterrupt, the session lives on); a shorter timeout keeps that cheap.
# session-limits: {"output_bytes": 65536, "timeout_ms": 3000}
# session-expect: status=timeout
# session-expect: killed_reason=timeout
# session-expect: stdout_truncated=true
# session-expect: stdout!~=^[\s\S]{65537}
# microvm-expect: status=killed
# microvm-expect: killed_reason=output
# microvm-expect: stdout_truncated=true
import os
buf = b"A" * 65536
while True:
    os.write(1, buf)
