# attack: clone() with CLONE_NEWUSER (and clone3) to build a namespace with full capabilities
# expect: status=completed
# expect: stdout~=^clone-newuser EPERM$
# expect: stdout~=^clone3 ENOSYS$
# expect: violation=clone
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^clone-newuser (EPERM|OK)$
# gvisor-expect: stdout~=^clone3 ENOSYS$
# gvisor-expect: stdout~=^kernel \S+$
# gvisor-expect: stdout!~=^kernel {HOSTKERNEL}$
# host: absent={PWNED}
# microvm-expect: status=completed
# microvm-expect: stdout~=^clone-newuser (EPERM|OK)$
# microvm-expect: stdout~=^kernel \S+$
#   Under gVisor user namespaces are gVisor's own (the kernel that answered is not the
#   host's, asserted); the child, "root" in it, writes to the host's /tmp in vain (the host
#   check). clone3 is refused by both.
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SIGCHLD, CLONE_NEWUSER = 17, 0x10000000
print("kernel", os.uname().release, flush=True)
def child():
    try:
        with open("{PWNED}", "w") as f:
            f.write("pwned")
    except OSError:
        pass
    libc._exit(0)
r = libc.syscall(ctypes.c_long(56), ctypes.c_long(CLONE_NEWUSER | SIGCHLD), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
if r == 0:
    child()
print("clone-newuser", "OK" if r > 0 else errno.errorcode[ctypes.get_errno()], flush=True)
if r > 0:
    os.waitpid(r, 0)
args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)
r = libc.syscall(ctypes.c_long(435), args, ctypes.c_long(88))
if r == 0:
    libc._exit(0)
print("clone3", "OK" if r > 0 else errno.errorcode[ctypes.get_errno()], flush=True)
