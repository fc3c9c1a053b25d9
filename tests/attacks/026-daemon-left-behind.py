# attack: double-fork a daemon (new session, closed stdio) that outlives the call and writes later
# expect: status=completed
# expect: stdout~=^daemon \d+ started$
# expect: stdout~=^parent done$
# microvm-expect: status=completed
# microvm-expect: stdout~=^daemon \d+ started$
# microvm-expect: stdout~=^parent done$
#   The daemon announces itself before it closes its stdio, so the run proves it existed; the
#   host checks after every run (no process in the sandbox uid range, no child of the
#   launcher, no cgroup: each shown able to fire by the positive control) prove it is gone.
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, f"daemon {os.getpid()} started\n".encode())
        for fd in (0, 1, 2, w):
            os.close(fd)
        time.sleep(3)
        open("/tmp/survived", "w").write("I survived\n")
        os._exit(0)
    os._exit(0)
os.close(w)
print(os.read(r, 100).decode().strip(), flush=True)
time.sleep(0.2)
print("parent done")
