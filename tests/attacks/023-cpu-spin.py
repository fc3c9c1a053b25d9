# attack: spin the CPU past the CPU budget (1 s of CPU, 20 s of wall time)
# limits: {"cpu_ms": 1000, "timeout_ms": 20000}
# expect: status=killed
# expect: killed_reason=cpu
# expect: duration_ms<6000
while True:
    pass
