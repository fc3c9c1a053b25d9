# attack: run binaries the program wrote itself (a copy of unshare in /tmp, /dev/shm, the workspace and a memfd) to get out from under the sandbox
# expect: status=completed
# expect: stdout~=^/tmp unshare-refused$
# expect: stdout~=^/dev/shm EACCES$
# expect: stdout~=^/workspace unshare-refused$
# expect: stdout~=^memfd unshare-refused$
# expect: stdout!~=escaped
# gvisor-expect: status=completed
# gvisor-expect: stdout!~=escaped
#   A program may run what it wrote (it can run its own code anyway; /dev/shm is noexec): what
#   it runs stays in the sandbox. The copy tries unshare -U -r and then to write into /usr.
import errno, os, shutil, subprocess
ATTEMPT = ["-U", "-r", "sh", "-c", "echo x > /usr/escaped && echo escaped"]
def run(argv0, path, fds=()):
    try:
        r = subprocess.run([path] + ATTEMPT, capture_output=True, timeout=10, pass_fds=fds)
        return "escaped" if b"escaped" in r.stdout else "unshare-refused"
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
for d in ("/tmp", "/dev/shm", "/workspace"):
    p = f"{d}/unshare-copy"
    shutil.copy("/usr/bin/unshare", p); os.chmod(p, 0o755)
    print(d, run("unshare", p), flush=True)
fd = os.memfd_create("unshare", 0)
os.write(fd, open("/usr/bin/unshare", "rb").read())
print("memfd", run("unshare", f"/proc/self/fd/{fd}", (fd,)), flush=True)
