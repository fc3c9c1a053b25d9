# attack: join another namespace through /proc/1/ns/* (PID 1 is the sandbox's init)
# expect: status=completed
# expect: stdout~=^open-ns-net (EACCES|EPERM)$|^setns-net EPERM$
# expect: stdout~=^open-ns-mnt (EACCES|EPERM)$|^setns-mnt EPERM$
# expect: stdout~=^open-ns-user (EACCES|EPERM)$|^setns-user EPERM$
# expect: stdout!~=setns-\w+ OK
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^open-ns-net (EACCES|EPERM|ENOENT)$|^setns-net (EPERM|ENOTSUP|EINVAL)$
# gvisor-expect: stdout~=^open-ns-mnt (EACCES|EPERM|ENOENT)$|^setns-mnt (EPERM|ENOTSUP|EINVAL)$
# gvisor-expect: stdout~=^open-ns-user (EACCES|EPERM|ENOENT)$|^setns-user (EPERM|ENOTSUP|EINVAL)$
# gvisor-expect: stdout!~=setns-\w+ OK
#   Each namespace either cannot be opened (gVisor has no /proc/*/ns for some) or cannot be
#   joined; with /proc/1/ns refused, the program's own is tried, to show setns itself refused.
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for ns in ("net", "mnt", "user"):
    fd = -1
    for who in ("1", "self"):
        try:
            fd = os.open(f"/proc/{who}/ns/{ns}", os.O_RDONLY)
            break
        except OSError as e:
            print(f"open-ns-{ns}" if who == "1" else f"open-own-ns-{ns}", errno.errorcode[e.errno], flush=True)
    if fd >= 0:
        r = libc.setns(fd, 0)
        print(f"setns-{ns}", "OK" if r == 0 else errno.errorcode[ctypes.get_errno()], flush=True)
