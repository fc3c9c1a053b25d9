# attack: see (and signal) host processes through /proc: only the sandbox's own pid namespace is visible
# expect: status=completed
# expect: stdout~=^visible<=3$
# expect: stdout~=^pid1_environ=(EACCES|EPERM)$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^visible<=3$
#   PID 1 under gVisor is the program itself: its environ is its own
import errno, os
pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
print("pids", sorted(pids))
print("visible<=3" if len(pids) <= 3 else f"visible={len(pids)}")
try:
    open("/proc/1/environ", "rb").read()
    print("pid1_environ=READ")
except OSError as e:
    print("pid1_environ=" + errno.errorcode[e.errno])
