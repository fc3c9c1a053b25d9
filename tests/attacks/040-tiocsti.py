# attack: TIOCSTI: push characters into the input queue of a terminal (stdin, /dev/tty)
# expect: status=completed
# expect: stdout~=^tiocsti-stdin EPERM$
# expect: stdout~=^dev-tty (ENOENT|ENXIO)$
# expect: violation=ioctl
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^tiocsti-stdin (EPERM|ENOTTY)$
# gvisor-expect: stdout~=^dev-tty (ENOENT|ENXIO|EIO)$
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
c = ctypes.c_char(b"x")
r = libc.ioctl(0, 0x5412, ctypes.byref(c))
print("tiocsti-stdin", "OK" if r == 0 else errno.errorcode[ctypes.get_errno()])
try:
    os.open("/dev/tty", os.O_RDWR)
    print("dev-tty OPEN")
except OSError as e:
    print("dev-tty", errno.errorcode[e.errno])
