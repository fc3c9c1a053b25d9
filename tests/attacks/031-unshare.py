# attack: unshare new user+mount namespaces (regain capabilities inside a nested namespace)
# expect: status=completed
# expect: stdout~=^unshare EPERM$
# expect: violation=unshare
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^unshare (EPERM|OK)$
# gvisor-expect: stdout~=^kernel \S+$
# gvisor-expect: stdout!~=^kernel {HOSTKERNEL}$
# host: absent={PWNED}
# microvm-expect: status=completed
# microvm-expect: stdout~=^unshare (EPERM|OK)$
# microvm-expect: stdout~=^kernel \S+$
#   Under gVisor an OK comes from gVisor's kernel (its release is not the host's, asserted):
#   a namespace of its own, whose "root" then writes to the host's /tmp in vain (the host
#   check); what else it may do is checked by 030/033/052. Natively the call is refused.
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(272), ctypes.c_long(0x10000000 | 0x00020000))
print("unshare", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()], flush=True)
print("kernel", os.uname().release, flush=True)
if r >= 0:
    try:
        with open("{PWNED}", "w") as f:
            f.write("pwned")
    except OSError as e:
        print("host-tmp", errno.errorcode[e.errno], flush=True)
