# attack: load a BPF program / create a BPF map (bpf)
# expect: status=completed
# expect: stdout~=^bpf EPERM$
# expect: violation=bpf
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^bpf (EPERM|ENOSYS)$
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(321), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
print("bpf", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
