# attack: open a raw IP socket (ICMP, spoofing)
# expect: status=completed
# expect: stdout~=^raw EPERM$
# expect: violation=socket
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^raw EPERM$
import errno, socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("raw OPEN")
except OSError as e:
    print("raw", errno.errorcode[e.errno])
