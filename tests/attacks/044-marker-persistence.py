# attack: leave marker files in /tmp, /dev/shm and /workspace for the next call or a concurrent one
# runner: marker
# expect: status=completed
# expect: stdout~=^tmp=\[\] shm=\[\] ws=\['main\.py'\]$|^written$
import os, sys, time
mode = sys.stdin.read().strip()
if mode == "write":
    for d in ("/tmp", "/dev/shm", "/workspace"):
        open(f"{d}/toolcage-marker", "w").write("run A\n")
    print("written", flush=True)
    time.sleep(2.5)
else:
    print(f"tmp={sorted(os.listdir('/tmp'))} shm={sorted(os.listdir('/dev/shm'))} ws={sorted(os.listdir('/workspace'))}")
