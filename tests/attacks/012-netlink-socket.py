# attack: open netlink sockets (route/xfrm/audit: kernel attack surface, interface changes)
# expect: status=completed
# expect: stdout~=^netlink-route EPERM$
# expect: stdout~=^netlink-audit EPERM$
# expect: violation=socket
# gvisor-expect: status=completed
#   gVisor emulates NETLINK_ROUTE in its own network stack (loopback only); audit is absent
# gvisor-expect: stdout~=^netlink-route (EPERM|OPEN)$
# gvisor-expect: stdout~=^netlink-audit (EPERM|EPROTONOSUPPORT)$
import errno, socket
for name, proto in (("netlink-route", 0), ("netlink-audit", 9)):
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)
        print(name, "OPEN")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
