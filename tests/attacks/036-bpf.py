# attack: load a BPF program / create a BPF map (bpf)
# expect: status=completed
# expect: stdout~=^bpf EPERM$
# expect: violation=bpf
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^bpf (EPERM|ENOSYS)$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^bpf EPERM$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(321), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
print("bpf", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
