# attack: set the system clock (clock_settime)
# expect: status=completed
# expect: stdout~=^clock_settime EPERM$
# expect: violation=clock_settime
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^clock_settime EPERM$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^clock_settime EPERM$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(227), ctypes.c_long(0), ctypes.create_string_buffer(16))
print("clock_settime", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
