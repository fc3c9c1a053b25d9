# attack: kill(-1, SIGKILL): signal every process the sandbox could reach
# expect: status=completed
# expect: stdout~=^kill\(-1\)=ok alive$
# expect: stdout~=^sibling=SIGKILL$
# host: healthz
# runner: concurrent
#   kill(-1) reaches only the sandbox's own processes: a sandbox running beside it (the
#   runner's companion) completes, and the launcher is the same process before and after.
import os, signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
os.kill(-1, signal.SIGKILL)  # everything but the caller and the namespace's init
print("kill(-1)=ok alive", flush=True)
_, st = os.waitpid(child, 0)
print("sibling=" + signal.Signals(os.WTERMSIG(st)).name if os.WIFSIGNALED(st) else "sibling=exited")
