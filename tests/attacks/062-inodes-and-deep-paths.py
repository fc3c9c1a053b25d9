# attack: build a directory chain thousands of levels deep (past PATH_MAX) for the teardown to walk, then exhaust the inodes of /workspace, /tmp and /dev/shm with empty files (which cost no bytes, so a size limit alone does not stop them)
# limits: {"workspace_mb": 4, "tmp_mb": 4}
#   (4 MiB tmpfs hold 4096 inodes: the chain alone fills the workspace, and every fill ends at
#   ENOSPC well within its budget even on an emulated CPU, where 64 MiB's 65536 did not)
# expect: status=completed
# expect: stdout~=^deep (none|ENOSPC|ENAMETOOLONG) depth=[0-9]{4,}$
# expect: stdout~=^workspace ENOSPC$
# expect: stdout~=^tmp ENOSPC$
# expect: stdout~=^shm (ENOSPC|ENOENT|EACCES|EROFS)$
# expect: stdout~=^after ok$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^deep (none|ENOSPC|ENAMETOOLONG) depth=[0-9]{4,}$
# gvisor-expect: stdout~=^workspace (ENOSPC|budget)$
# gvisor-expect: stdout~=^tmp (ENOSPC|ENOMEM|budget)$
# gvisor-expect: stdout~=^after ok$
#   Natively each tmpfs has an inode cap next to its size (the workspace, /tmp, /dev/shm): the
#   files stop at ENOSPC within a second. Under gVisor a file costs a round trip through the
#   sentry and the 2 s budget per directory ends first ("budget"); its /tmp lives in the
#   sentry's memory, inside the sandbox's memory limit. After the run the host checks find no
#   mount, process or cgroup left (the 4096-deep chain included), and /healthz answers.
import errno, os, time
depth = 0
try:
    os.chdir("/workspace")
    while depth < 4096:
        os.mkdir("d")
        os.chdir("d")
        depth += 1
    print("deep none", f"depth={depth}", flush=True)
except OSError as e:
    print("deep", errno.errorcode[e.errno], f"depth={depth}", flush=True)
def fill(d, budget_s=2.0):
    end = time.monotonic() + budget_s
    try:
        os.chdir(d)
        n = 0
        while True:
            for _ in range(500):
                os.close(os.open(f"f{n}", os.O_CREAT | os.O_WRONLY, 0o600))
                n += 1
            if time.monotonic() > end:
                return "budget"
    except OSError as e:
        return errno.errorcode[e.errno]
print("workspace", fill("/workspace"), flush=True)
print("tmp", fill("/tmp"), flush=True)
print("shm", fill("/dev/shm"), flush=True)
print("after ok", flush=True)
