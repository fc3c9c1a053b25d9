# attack: open socket families with a history of kernel bugs (AF_VSOCK, AF_ALG, RDS, TIPC, Bluetooth, CAN) and reach host services through Unix sockets (PostgreSQL, Docker, systemd, D-Bus) and the abstract namespace (the test listens on {ABSTRACT})
# expect: status=completed
# expect: stdout~=^AF_VSOCK EPERM$
# expect: stdout~=^AF_ALG EPERM$
# expect: stdout~=^AF_RDS EPERM$
# expect: stdout~=^AF_TIPC EPERM$
# expect: stdout~=^unix /run/postgresql/\.s\.PGSQL\.5432 ENOENT$
# expect: stdout~=^unix /var/run/docker\.sock ENOENT$
# expect: stdout~=^abstract ECONNREFUSED$
# expect: stdout!~=CONNECTED|OPEN
# expect: violation=socket
# host: listener
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^AF_VSOCK (EPERM|EAFNOSUPPORT)$
# gvisor-expect: stdout~=^AF_ALG (EPERM|EAFNOSUPPORT)$
# gvisor-expect: stdout~=^abstract ECONNREFUSED$
# gvisor-expect: stdout!~=CONNECTED|OPEN
# microvm-expect: status=completed
# microvm-expect: stdout~=^unix /run/postgresql/\.s\.PGSQL\.5432 ENOENT$
# microvm-expect: stdout~=^unix /var/run/docker\.sock ENOENT$
# microvm-expect: stdout~=^abstract ECONNREFUSED$
# microvm-expect: stdout!~=CONNECTED
import errno, socket
for name in ("AF_VSOCK", "AF_ALG", "AF_RDS", "AF_TIPC", "AF_BLUETOOTH", "AF_CAN"):
    fam = getattr(socket, name)
    try:
        s = socket.socket(fam, socket.SOCK_RAW if name == "AF_CAN" else socket.SOCK_SEQPACKET)
        print(name, "OPEN"); s.close()
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
for path in ("/run/postgresql/.s.PGSQL.5432", "/var/run/docker.sock", "/run/systemd/private", "/run/dbus/system_bus_socket"):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path); print("unix", path, "CONNECTED")
    except OSError as e:
        print("unix", path, errno.errorcode.get(e.errno, e.errno))
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{ABSTRACT}"); print("abstract CONNECTED")
except OSError as e:
    print("abstract", errno.errorcode.get(e.errno, e.errno))
