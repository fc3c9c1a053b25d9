# attack: bypass the seccomp filter with the i386 system call ABI (int 0x80)
# expect: status=failed
# expect: killed_reason=null
# expect: signal=SIGSYS
# expect: stdout~=^before$
# expect: stdout!~=after
#   Some hosts switch the kernel's i386 emulation off (int 0x80 faults before any filter runs):
#   the probe runs this unsandboxed first, and there only the attack's failure is asserted.
# probe: stdout~=^after$
# probe-refused-expect: stdout~=^before$
# probe-refused-expect: stdout!~=after
#   gVisor has no i386 ABI: int 0x80 never reaches the host kernel. Depending on the host it
#   returns an error into the program ("result -38") or faults (SIGSEGV); never getpid's
#   answer (unsandboxed it prints "result getpid"), never the host's seccomp (SIGSYS)
# gvisor-expect: stdout~=^before$
# gvisor-expect: signal!~=SIGSYS
# gvisor-expect: stdout!~=result getpid
# gvisor-expect: stdout!~=result [0-9]
import ctypes, mmap, os, sys
print("before", flush=True)
# mov eax, 20 (getpid, i386); int 0x80; ret
code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
r = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
print("after", flush=True)
print("result", "getpid" if r == os.getpid() else r, flush=True)
