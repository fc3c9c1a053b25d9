# attack: unshare new user+mount namespaces (regain capabilities inside a nested namespace)
# expect: status=completed
# expect: stdout~=^unshare EPERM$
# expect: violation=unshare
# gvisor-expect: status=completed
#   a namespace of gVisor's kernel, not the host's: what it may do is checked by 030/033/052
# gvisor-expect: stdout~=^unshare (EPERM|OK)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(272), ctypes.c_long(0x10000000 | 0x00020000))
print("unshare", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
