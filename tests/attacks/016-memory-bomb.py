# attack: allocate and touch 1 GiB with a 64 MiB memory limit
# limits: {"memory_mb": 64}
# expect: status=killed
# expect: killed_reason=memory
# expect: signal=SIGKILL
# expect: stdout!~=survived
chunks = []
for i in range(1024):
    chunks.append(bytearray(1 << 20))
print("survived", flush=True)
