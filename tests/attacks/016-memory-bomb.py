# attack: allocate and touch 1 GiB with a 64 MiB memory limit
# limits: {"memory_mb": 64}
# expect: status=killed
# expect: killed_reason=memory
# expect: signal=SIGKILL
# expect: stdout!~=survived
# microvm-expect: status=killed
# microvm-expect: killed_reason~=^(memory|cpu)$
# microvm-expect: signal~=^SIG(KILL|XCPU)$
# microvm-expect: stdout!~=survived
# (in the guest the cgroup reclaims the interpreter's own pages, read again over 9p, before the
# OOM killer acts: under TCG the CPU budget may end the bomb first; contained either way, and
# the guest's kernel says which: killed_reason)
chunks = []
for i in range(1024):
    chunks.append(bytearray(1 << 20))
print("survived", flush=True)
