# attack: fork until the kernel refuses (pids limit 32); every child stays alive
# limits: {"pids": 32, "timeout_ms": 20000}
# expect: status=completed
# expect: stdout~=^stopped EAGAIN after ([1-9]|[12][0-9]|3[01]) forks$
# microvm-expect: status=completed
# microvm-expect: stdout~=^stopped EAGAIN after ([1-9]|[12][0-9]|3[01]) forks$
# microvm-expect: pids_limit_hit=true
import errno, os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print(f"stopped {errno.errorcode[e.errno]} after {n} forks", flush=True)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
