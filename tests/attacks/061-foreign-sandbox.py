# attack: reach a sandbox running beside this one (the runner's companion): its processes in /proc, signals to them, its SysV shared memory, message queue and semaphores (key 0x7c0ffee), and the IPC objects listed in /proc/sysvipc
# expect: status=completed
# expect: stdout~=^foreign-procs \[\]$
# expect: stdout~=^signalled 0$
# expect: stdout~=^shmget (ENOENT|EPERM)$
# expect: stdout~=^msgget (ENOENT|EPERM)$
# expect: stdout~=^semget (ENOENT|EPERM)$
# expect: stdout~=^sysvipc \[\]$
# runner: concurrent
#   The companion (061-foreign-sandbox.companion.py) creates the IPC objects, names itself in
#   its command line, prints the window in which they existed and checks afterwards that its
#   shared memory still holds what it wrote; the runner asserts that this attack looked inside
#   that window. PIDs are scanned up to 65536 (the sandbox's own PID namespace starts at 1).
import ctypes, errno, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x7c0ffee
print("looked", f"{time.time():.3f}", flush=True)
mine = {1, os.getpid()}
foreign = []
for d in os.listdir("/proc"):
    if d.isdigit() and int(d) not in mine:
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        foreign.append(f"{d}:{cmd[:60]}")
print("foreign-procs", foreign, flush=True)
hit = 0
for pid in range(2, 65536):
    if pid in mine:
        continue
    try:
        os.kill(pid, signal.SIGSTOP)
        hit += 1
    except OSError:
        pass
print("signalled", hit, flush=True)
for name, fn, args in (("shmget", libc.shmget, (KEY, 0, 0)), ("msgget", libc.msgget, (KEY, 0)),
                       ("semget", libc.semget, (KEY, 0, 0))):
    r = fn(*[ctypes.c_int(a) for a in args])
    print(name, f"OPEN id={r}" if r >= 0 else errno.errorcode[ctypes.get_errno()], flush=True)
found = []
for kind in ("shm", "msg", "sem"):
    try:
        lines = open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
        found += [f"{kind}:{l.split()[0]}" for l in lines if l.strip()]
    except FileNotFoundError:
        pass
print("sysvipc", found, flush=True)
