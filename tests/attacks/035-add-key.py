# attack: add a key to the kernel keyring (add_key)
# expect: status=completed
# expect: stdout~=^add_key EPERM$
# expect: violation=add_key
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^add_key (EPERM|EACCES|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(248), b'user', b'k', b'v', ctypes.c_long(1), ctypes.c_long(-3))
print("add_key", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
