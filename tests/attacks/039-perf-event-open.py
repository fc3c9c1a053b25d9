# attack: perf_event_open (kernel attack surface, side channels)
# expect: status=completed
# expect: stdout~=^perf_event_open EPERM$
# expect: violation=perf_event_open
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^perf_event_open (EPERM|ENODEV|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(298), ctypes.create_string_buffer(128), ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0))
print("perf_event_open", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
