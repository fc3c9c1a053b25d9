# attack: spread the CPU spin over 4 processes (the budget is for the whole tree)
# limits: {"cpu_ms": 1000, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=cpu
# expect: duration_ms<6000
for i in 1 2 3 4; do ( while :; do :; done ) & done
wait
