# attack: userfaultfd (the classic primitive for winning kernel races)
# expect: status=completed
# expect: stdout~=^userfaultfd EPERM$
# expect: violation=userfaultfd
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^userfaultfd (EPERM|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(323), ctypes.c_long(0))
print("userfaultfd", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
