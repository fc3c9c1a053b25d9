# attack: sleep past the wall-clock limit, with a background child and a new session
# limits: {"timeout_ms": 1000}
# expect: status=timeout
# expect: killed_reason=timeout
# expect: duration_ms<4000
setsid sleep 300 &
sleep 300 &
sleep 300
