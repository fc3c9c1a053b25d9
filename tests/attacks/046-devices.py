# attack: reach kernel memory and disks through device nodes (/dev/mem, /dev/kmsg, block devices) or make one with mknod
# expect: status=completed
# expect: stdout~=^/dev/mem ENOENT$
# expect: stdout~=^/dev/kmsg ENOENT$
# expect: stdout~=^/dev/sda ENOENT$
# expect: stdout~=^/dev/vda ENOENT$
# expect: stdout~=^mknod (EPERM|EROFS)$
# expect: stdout~=^dev=\['core', 'fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero'\]$|^dev=\['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero'\]$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^/dev/mem ENOENT$
# gvisor-expect: stdout~=^/dev/kmsg ENOENT$
# gvisor-expect: stdout~=^/dev/sda ENOENT$
# gvisor-expect: stdout~=^/dev/vda ENOENT$
# gvisor-expect: stdout~=^mknod (EPERM|EROFS)$
#   gVisor's own /dev (its fuse, net/tun and ptmx need capabilities the program lacks)
# gvisor-expect: stdout~=^dev=\['fd', 'full', 'fuse', 'net', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero'\]$
import errno, os, stat
for p in ("/dev/mem", "/dev/kmsg", "/dev/sda", "/dev/vda"):
    try:
        os.open(p, os.O_RDONLY)
        print(p, "OPEN")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
try:
    os.mknod("/workspace/mem", stat.S_IFCHR | 0o600, os.makedev(1, 1))
    print("mknod OK")
except OSError as e:
    print("mknod", errno.errorcode[e.errno])
print("dev=" + str(sorted(os.listdir("/dev"))))
