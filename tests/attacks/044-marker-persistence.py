# attack: leave marker files in /tmp, /dev/shm and /workspace for the next call or a concurrent one
# runner: marker
# expect: status=completed
# expect: stdout~=^tmp=\[\] shm=\[\] ws=\[('\.toolcage', )?'main\.py'\]$|^written$
#   In sessions (the runner's markerInSessions): the workspace holds the driver's directory
#   (.toolcage), not main.py.
# session-expect: status=completed
# session-expect: stdout~=^tmp=\[\] shm=\[\] ws=\['\.toolcage'\]$|^written$
#   Run A prints when it wrote its markers and when it stopped waiting ("window S E", wall
#   clock), run C when it looked ("looked T"): the runner asserts S <= T <= E, so the two
#   really overlapped (the clock is the host's: time namespaces are not used).
import os, sys, time
mode = sys.stdin.read().strip()
if mode == "write":
    for d in ("/tmp", "/dev/shm", "/workspace"):
        open(f"{d}/toolcage-marker", "w").write("run A\n")
    start = time.time()
    print("written", flush=True)
    time.sleep(2.5)
    print(f"window {start:.3f} {time.time():.3f}", flush=True)
else:
    looked = time.time()
    print(f"tmp={sorted(os.listdir('/tmp'))} shm={sorted(os.listdir('/dev/shm'))} ws={sorted(os.listdir('/workspace'))}")
    print(f"looked {looked:.3f}")
