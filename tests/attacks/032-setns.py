# attack: join another namespace through /proc/1/ns/* (PID 1 is the sandbox's init)
# expect: status=completed
# expect: stdout~=^open-ns (EACCES|EPERM)$|^setns EPERM$
# expect: stdout!~=setns OK
# gvisor-expect: status~=^(completed|failed)$
# gvisor-expect: stdout~=^open-ns (EACCES|EPERM|ENOENT)$|^setns (EPERM|ENOTSUP)$
# gvisor-expect: stdout!~=setns OK
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for ns in ("net", "mnt", "user"):
    try:
        fd = os.open(f"/proc/1/ns/{ns}", os.O_RDONLY)
    except OSError as e:
        print("open-ns", errno.errorcode[e.errno])
        fd = os.open(f"/proc/self/ns/{ns}", os.O_RDONLY)
    r = libc.setns(fd, 0)
    print("setns", "OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
