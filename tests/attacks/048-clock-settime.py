# attack: set the system clock (clock_settime)
# expect: status=completed
# expect: stdout~=^clock_settime EPERM$
# expect: violation=clock_settime
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^clock_settime EPERM$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(227), ctypes.c_long(0), ctypes.create_string_buffer(16))
print("clock_settime", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
