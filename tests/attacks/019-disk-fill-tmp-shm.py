# attack: fill /tmp and /dev/shm (RAM-backed: must be capped, not eat host memory)
# limits: {"tmp_mb": 8, "memory_mb": 256}
# expect: status=completed
# expect: stdout~=^/tmp ENOSPC after [0-9] MiB$
# expect: stdout~=^/dev/shm ENOSPC after [0-9] MiB$
import errno
for d in ("/tmp", "/dev/shm"):
    n = 0
    try:
        with open(d + "/fill", "wb") as f:
            for n in range(1, 1000):
                f.write(b"\0" * (1 << 20))
                f.flush()
        print(d, "FULL WRITE")
    except OSError as e:
        print(d, errno.errorcode[e.errno], "after", n - 1, "MiB")
