# attack: reach the host through its own network address ({HOSTIP}) and the default gateway
# expect: status=completed
# expect: stdout~=^{HOSTIP} ENETUNREACH$
# expect: stdout~=^routes=lo-only$
# host: listener
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^{HOSTIP} (ENETUNREACH|EHOSTUNREACH)$
# gvisor-expect: stdout~=^routes=lo-only$
# microvm-expect: status=completed
# microvm-expect: stdout~=^{HOSTIP} (ENETUNREACH|EHOSTUNREACH)$
# microvm-expect: stdout~=^routes=lo-only$
import errno, socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(2)
try:
    s.connect(("{HOSTIP}", {PORT}))
    print("{HOSTIP}", "CONNECTED")
except OSError as e:
    print("{HOSTIP}", errno.errorcode.get(e.errno, str(e)))
routes = [l.split()[0] for l in open("/proc/net/route").read().splitlines()[1:]]
print("routes=" + ("lo-only" if not routes or set(routes) <= {"lo"} else ",".join(routes)))
