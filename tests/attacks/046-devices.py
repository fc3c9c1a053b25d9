# attack: reach kernel memory and disks through device nodes (/dev/mem, /dev/kmsg, block devices) or make one with mknod
# expect: status=completed
# expect: stdout~=^/dev/mem ENOENT$
# expect: stdout~=^/dev/kmsg ENOENT$
# expect: stdout~=^/dev/sda ENOENT$
# expect: stdout~=^/dev/vda ENOENT$
# expect: stdout~=^mknod (EPERM|EROFS)$
# expect: stdout~=^dev=\['core', 'fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero'\]$|^dev=\['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero'\]$
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
