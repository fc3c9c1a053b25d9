# attack: double-fork a daemon (new session, closed stdio) that outlives the call and writes later
# expect: status=completed
# expect: stdout~=^parent done$
# host: absent={PWNED}
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(3)
        open("{PWNED}", "w").write("I survived\n")
        os._exit(0)
    os._exit(0)
time.sleep(0.2)
print("parent done")
