# attack: chroot escape (chroot into a subdirectory, then walk up with ..)
# expect: status=completed
# expect: stdout~=^chroot EPERM$
# expect: violation=chroot
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^chroot EPERM$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^chroot EPERM$
import errno, os
os.makedirs("/workspace/jail", exist_ok=True)
try:
    os.chroot("/workspace/jail")
    print("chroot OK")
except OSError as e:
    print("chroot", errno.errorcode[e.errno])
