# attack: start threads until the kernel refuses (pids limit 32 counts threads)
# limits: {"pids": 32}
# expect: status=completed
# expect: stdout~=^stopped RuntimeError after ([1-9]|[12][0-9]|3[01]) threads$
import threading, time
ev = threading.Event()
n = 0
try:
    while True:
        threading.Thread(target=ev.wait, daemon=True).start()
        n += 1
except RuntimeError:
    print(f"stopped RuntimeError after {n} threads", flush=True)
ev.set()
