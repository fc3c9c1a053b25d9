# attack: perf_event_open (kernel attack surface, side channels)
# expect: status=completed
# expect: stdout~=^perf_event_open EPERM$
# expect: violation=perf_event_open
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^perf_event_open (EPERM|ENODEV|ENOSYS)$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^perf_event_open EPERM$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(298), ctypes.create_string_buffer(128), ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0))
print("perf_event_open", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
