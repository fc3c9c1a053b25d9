# attack: userfaultfd (the classic primitive for winning kernel races)
# expect: status=completed
# expect: stdout~=^userfaultfd EPERM$
# expect: violation=userfaultfd
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^userfaultfd (EPERM|ENOSYS)$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^userfaultfd EPERM$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(323), ctypes.c_long(0))
print("userfaultfd", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
