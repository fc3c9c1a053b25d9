# attack: open a packet socket (sniff or inject link-layer frames)
# expect: status=completed
# expect: stdout~=^packet EPERM$
# expect: stdout~=^inet-packet EPERM$
# expect: violation=socket
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^packet EPERM$
# gvisor-expect: stdout~=^inet-packet (EPERM|EPROTONOSUPPORT)$
import errno, socket
for name, args in (("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0x0300)),
                   ("inet-packet", (socket.AF_INET, 10, 0))):  # SOCK_PACKET
    try:
        socket.socket(*args)
        print(name, "OPEN")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
