# attack: clone() with CLONE_NEWUSER (and clone3) to build a namespace with full capabilities
# expect: status=completed
# expect: stdout~=^clone-newuser EPERM$
# expect: stdout~=^clone3 ENOSYS$
# expect: violation=clone
# gvisor-expect: status=completed
#   user namespaces are gVisor's own; clone3 is refused
# gvisor-expect: stdout~=^clone-newuser (EPERM|OK)$
# gvisor-expect: stdout~=^clone3 ENOSYS$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SIGCHLD, CLONE_NEWUSER = 17, 0x10000000
r = libc.syscall(ctypes.c_long(56), ctypes.c_long(CLONE_NEWUSER | SIGCHLD), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
if r == 0:
    libc._exit(0)
print("clone-newuser", "OK" if r > 0 else errno.errorcode[ctypes.get_errno()])
args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)
r = libc.syscall(ctypes.c_long(435), args, ctypes.c_long(88))
if r == 0:
    libc._exit(0)
print("clone3", "OK" if r > 0 else errno.errorcode[ctypes.get_errno()])
