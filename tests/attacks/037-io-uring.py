# attack: io_uring_setup (io_uring bypasses seccomp for the operations it submits)
# expect: status=completed
# expect: stdout~=^io_uring_setup EPERM$
# expect: violation=io_uring_setup
# gvisor-expect: status=completed
#   gVisor implements io_uring in its own kernel (its seccomp bypass concern is the host's)
# gvisor-expect: stdout~=^io_uring_setup (EPERM|ENOSYS|OK)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(425), ctypes.c_long(8), ctypes.create_string_buffer(120))
print("io_uring_setup", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
