# attack: open netlink sockets (route/xfrm/audit: kernel attack surface, interface changes)
# expect: status=completed
# expect: stdout~=^netlink-route EPERM$
# expect: stdout~=^netlink-audit EPERM$
# expect: violation=socket
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^netlink-route (EPERM|OPEN)$
# gvisor-expect: stdout~=^netlink-audit (EPERM|EPROTONOSUPPORT)$
# gvisor-expect: stdout~=^kernel \S+$
# gvisor-expect: stdout!~=^kernel {HOSTKERNEL}$
# gvisor-expect: stdout~=^links \['lo'\]$
#   gVisor emulates NETLINK_ROUTE in its own network stack (the kernel that answered is not
#   the host's, asserted): the links it lists are the sandbox's loopback only, none of the
#   host's interfaces. Audit is absent.
import errno, os, socket
print("kernel", os.uname().release, flush=True)
for name, proto in (("netlink-route", 0), ("netlink-audit", 9)):
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto).close()
        print(name, "OPEN", flush=True)
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
try:
    print("links", sorted(n for _, n in socket.if_nameindex()), flush=True)
except OSError as e:
    print("links", errno.errorcode[e.errno], flush=True)
