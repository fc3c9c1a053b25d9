# attack: SIGKILL and SIGSTOP the sandbox's PID 1, then sleep past the time limit: the timeout and the teardown must still work
# limits: {"timeout_ms": 2000}
# expect: status=timeout
# expect: killed_reason=timeout
# expect: stdout~=^kill SIGKILL sent$
# expect: stdout~=^kill SIGSTOP sent$
# expect: stdout~=^pid1 alive [SR]$
# expect: stdout!~=after
# gvisor-expect: status~=^(timeout|failed)$
# gvisor-expect: stdout!~=after
#   (gVisor's init is killed by SIGKILL from inside: the sandbox ends at once, contained.)
#   Signals to a pid namespace's init from inside it are dropped unless it handles them; PID 1
#   is not stopped, and the launcher's wall-clock kill ends the run (the host checks prove the
#   teardown).
import errno, os, signal, time
for sig in (signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(1, sig); print("kill", sig.name, "sent", flush=True)
    except OSError as e:
        print("kill", sig.name, errno.errorcode[e.errno], flush=True)
time.sleep(0.3)
print("pid1", "alive" if os.path.exists("/proc/1") else "gone", open("/proc/1/stat").read().split()[2], flush=True)
time.sleep(30)
print("after", flush=True)
