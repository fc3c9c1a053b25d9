# attack: overwrite the sandbox's runtime on the host: /proc/self/exe and /proc/1/exe (runc CVE-2019-5736 style), the interpreter, libc; and a splice from a read-only file into a pipe that is then written (dirty-pipe style)
# expect: status=completed
# expect: stdout~=^self-exe-w (EACCES|EROFS)$
# expect: stdout~=^pid1-exe-w (EACCES|ENOENT)$
# expect: stdout~=^python-w (EACCES|EROFS)$
# expect: stdout~=^libc-w (EACCES|EROFS)$
# expect: stdout~=^splice (done 16|EINVAL|EPERM)$
# host: unchanged=/usr/bin/python3.11
# host: unchanged=/lib/x86_64-linux-gnu/libc.so.6
# host: unchanged={BIN}
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^self-exe-w (EACCES|EROFS|ETXTBSY)$
# gvisor-expect: stdout~=^python-w (EACCES|EROFS)$
# gvisor-expect: stdout~=^libc-w (EACCES|EROFS)$
# microvm-expect: status=completed
# microvm-expect: stdout~=^self-exe-w (EACCES|EROFS)$
# microvm-expect: stdout~=^python-w (EACCES|EROFS)$
# microvm-expect: stdout~=^libc-w (EACCES|EROFS)$
#   EROFS where the host itself is read-only (the cgroup v2 VM mounts it so). The host checks
#   hash the files before and after the run: whatever the open calls said, the bytes on the
#   host did not change.
import errno, os
def try_open(p, flags):
    try:
        fd = os.open(p, flags)
        os.write(fd, b"PWNED") if flags & os.O_WRONLY else None
        os.close(fd)
        return "OPEN"
    except OSError as e:
        return errno.errorcode[e.errno]
print("self-exe-w", try_open("/proc/self/exe", os.O_WRONLY), flush=True)
print("pid1-exe-w", try_open("/proc/1/exe", os.O_WRONLY), flush=True)
print("python-w", try_open("/usr/bin/python3.11", os.O_WRONLY), flush=True)
print("libc-w", try_open("/lib/x86_64-linux-gnu/libc.so.6", os.O_WRONLY), flush=True)
try:
    r, w = os.pipe()
    fd = os.open("/usr/bin/python3.11", os.O_RDONLY)
    n = os.splice(fd, w, 16)
    os.write(w, b"PWNED" * 100)
    print("splice done", n, flush=True)
except OSError as e:
    print("splice", errno.errorcode[e.errno], flush=True)
