# attack: find file descriptors leaked from the launcher or server (sockets, memfds, cgroup files)
# expect: status=completed
# expect: stdout~=^fds=\[0, 1, 2\]$
# expect: stdout~=^open-beyond=none$
#   In a session the python driver (execution/session/driver.py) runs the code in its own
#   process and keeps two descriptors of its own: 3, the session's request pipe (its stdin
#   from the launcher), and 4, /dev/null; nothing else may be open.
# session-expect: status=completed
# session-expect: stdout~=^fds=\[0, 1, 2, 3, 4\]$
# session-expect: stdout~=^open-beyond=\[\(3, 'pipe:\[\d+\]'\), \(4, '/dev/null'\)\]$
import os
fds = []
for f in os.listdir("/proc/self/fd"):
    try:
        if not os.readlink(f"/proc/self/fd/{f}").startswith("/proc/"):
            fds.append(int(f))
    except OSError:
        pass  # the fd listdir used, already closed
print("fds=" + str(sorted(fds)))
found = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        found.append((fd, os.readlink(f"/proc/self/fd/{fd}")))
    except OSError:
        pass
print("open-beyond=" + (str(found) if found else "none"))
