# attack: mount a filesystem (tmpfs over /usr, procfs, bind the root) and remount / read-write
# expect: status=completed
# expect: stdout~=^mount-tmpfs EPERM$
# expect: stdout~=^remount-rw EPERM$
# expect: stdout~=^umount-proc EPERM$
# expect: stdout~=^fsopen EPERM$
# expect: violation=mount
# expect: violation=umount2
# expect: violation=fsopen
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^mount-tmpfs EPERM$
# gvisor-expect: stdout~=^remount-rw EPERM$
# gvisor-expect: stdout~=^umount-proc EPERM$
# gvisor-expect: stdout~=^fsopen (EPERM|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def res(r):
    return "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()]
print("mount-tmpfs", res(libc.mount(b"none", b"/usr", b"tmpfs", 0, None)))
print("remount-rw", res(libc.mount(None, b"/", None, 32 | 4096, None)))  # MS_REMOUNT|MS_BIND
print("umount-proc", res(libc.umount2(b"/proc", 2)))
libc.syscall.restype = ctypes.c_long
print("fsopen", res(libc.syscall(ctypes.c_long(430), b"tmpfs", ctypes.c_long(0))))
