# attack: read the kernel keyrings (keyctl: session/user keyrings of other processes)
# expect: status=completed
# expect: stdout~=^keyctl EPERM$
# expect: violation=keyctl
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^keyctl (EPERM|EACCES|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(250), ctypes.c_long(0), ctypes.c_long(-3))
print("keyctl", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
