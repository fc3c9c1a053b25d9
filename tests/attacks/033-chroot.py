# attack: chroot escape (chroot into a subdirectory, then walk up with ..)
# expect: status=completed
# expect: stdout~=^chroot EPERM$
# expect: violation=chroot
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^chroot EPERM$
import errno, os
os.makedirs("/workspace/jail", exist_ok=True)
try:
    os.chroot("/workspace/jail")
    print("chroot OK")
except OSError as e:
    print("chroot", errno.errorcode[e.errno])
