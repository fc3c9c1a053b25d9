# attack: resolve names and talk to DNS servers (host resolver, public resolvers)
# expect: status=completed
# expect: stdout~=^resolve=gaierror$
# expect: stdout~=^udp 8\.8\.8\.8 ENETUNREACH$
# expect: stdout~=^udp 127\.0\.0\.53 (ECONNREFUSED|NOANSWER)$
# expect: stdout~=^resolv\.conf=''$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^resolve=gaierror$
# gvisor-expect: stdout~=^udp 8\.8\.8\.8 (ENETUNREACH|EHOSTUNREACH)$
# gvisor-expect: stdout~=^udp 127\.0\.0\.53 (ECONNREFUSED|NOANSWER)$
# gvisor-expect: stdout~=^resolv\.conf=''$
import errno, socket
try:
    socket.getaddrinfo("example.com", 80)
    print("resolve=OK")
except socket.gaierror:
    print("resolve=gaierror")
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
for ip in ("8.8.8.8", "127.0.0.53"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    try:
        s.sendto(q, (ip, 53))
        s.recvfrom(512)
        print("udp", ip, "ANSWER")
    except socket.timeout:
        print("udp", ip, "NOANSWER")
    except OSError as e:
        print("udp", ip, errno.errorcode.get(e.errno, str(e)))
print("resolv.conf=" + repr(open("/etc/resolv.conf").read()))
