# attack: ptrace the sandbox's PID 1 and a sibling (read its memory, inject code)
# expect: status=completed
# expect: stdout~=^attach-pid1 EPERM$
# expect: stdout~=^attach-child EPERM$
# expect: stdout~=^traceme EPERM$
# expect: stdout~=^process_vm_readv EPERM$
# expect: violation=ptrace
# expect: violation=process_vm_readv
# gvisor-expect: status=completed
#   ptrace of a sibling is gVisor's own emulation inside the sandbox; PID 1 (the program's
#   parent) and process_vm_readv stay out of reach
# gvisor-expect: stdout~=^attach-pid1 EPERM$
# gvisor-expect: stdout~=^process_vm_readv (EPERM|ENOSYS)$
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()]
PTRACE_ATTACH, PTRACE_TRACEME = 16, 0
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
print("attach-pid1", sc(101, PTRACE_ATTACH, 1, 0, 0))
print("attach-child", sc(101, PTRACE_ATTACH, child, 0, 0))
print("traceme", sc(101, PTRACE_TRACEME, 0, 0, 0))
print("process_vm_readv", sc(310, child, 0, 0, 0, 0, 0))
os.kill(child, 9)
