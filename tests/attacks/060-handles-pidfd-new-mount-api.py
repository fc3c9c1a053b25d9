# attack: the calls around the classic checks: open_by_handle_at (the Shocker escape), pidfd_getfd on PID 1, the new mount API (open_tree, move_mount, fsopen, mount_setattr), request_key, kexec_load
# expect: status=completed
# expect: stdout~=^open_by_handle_at EPERM$
# expect: stdout~=^pidfd_getfd EPERM$
# expect: stdout~=^open_tree EPERM$
# expect: stdout~=^move_mount EPERM$
# expect: stdout~=^fsopen EPERM$
# expect: stdout~=^mount_setattr EPERM$
# expect: stdout~=^request_key EPERM$
# expect: stdout~=^kexec_load EPERM$
# expect: violation=open_by_handle_at
# expect: violation=pidfd_getfd
# expect: violation=open_tree
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^open_by_handle_at (EPERM|ENOSYS|ENOTSUP|EOPNOTSUPP)$
# gvisor-expect: stdout~=^kexec_load (EPERM|ENOSYS)$
# gvisor-expect: stdout~=^pidfd_getfd EPERM
# gvisor-expect: stdout!~= OK$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), flush=True)
    return r
# x86_64 system call numbers
sc("open_by_handle_at", 304, -100, ctypes.create_string_buffer(64), 0)
pfd = libc.syscall(434, 1, 0)  # pidfd_open(1): our own init, allowed
if pfd >= 0:
    sc("pidfd_getfd", 438, pfd, 0, 0)
else:
    print("pidfd_getfd EPERM (no pidfd)")
sc("open_tree", 428, -100, b"/", 1)
sc("move_mount", 429, -100, b"/", -100, b"/tmp", 0)
sc("fsopen", 430, b"tmpfs", 0)
sc("mount_setattr", 442, -100, b"/", 0, None, 0)
sc("request_key", 249, b"user", b"x", None, 0)
sc("kexec_load", 246, 0, 0, None, 0)
