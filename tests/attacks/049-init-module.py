# attack: load a kernel module (init_module)
# expect: status=completed
# expect: stdout~=^init_module EPERM$
# expect: violation=init_module
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^init_module (EPERM|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(175), ctypes.create_string_buffer(64), ctypes.c_long(64), b'')
print("init_module", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
