# attack: the classic bash fork bomb; the host stays responsive and nothing survives the timeout
# limits: {"pids": 32, "timeout_ms": 3000}
# expect: status=timeout
# expect: killed_reason=timeout
# expect: duration_ms<6000
# gvisor-expect: status~=^(timeout|killed)$
#   RLIMIT_NPROC inside gVisor, or the host pids backstop (TC_GV_PIDS_HEADROOM)
# gvisor-expect: killed_reason~=^(timeout|pids)$
# gvisor-expect: duration_ms<6000
b() { b | b & }; b
sleep 30
