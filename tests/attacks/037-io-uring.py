# attack: io_uring_setup (io_uring bypasses seccomp for the operations it submits)
# expect: status=completed
# expect: stdout~=^io_uring_setup EPERM$
# expect: violation=io_uring_setup
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^io_uring_setup (EPERM|ENOSYS|OK)$
# gvisor-expect: stdout~=^kernel \S+$
# gvisor-expect: stdout!~=^kernel {HOSTKERNEL}$
#   gVisor implements io_uring in its own kernel (the one that answered, asserted not to be
#   the host's): the operations it submits are the sentry's, under gVisor's own filter.
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(425), ctypes.c_long(8), ctypes.create_string_buffer(120))
print("io_uring_setup", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()], flush=True)
print("kernel", os.uname().release, flush=True)
