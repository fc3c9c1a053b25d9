# attack: reach a TCP service listening on the host's loopback (the test opens one on {PORT})
# expect: status=completed
# expect: stdout~=^127\.0\.0\.1 ECONNREFUSED$
# expect: stdout~=^::1 (ECONNREFUSED|EADDRNOTAVAIL|ENETUNREACH)$
# host: listener
# microvm-expect: status=completed
# microvm-expect: stdout~=^127\.0\.0\.1 (ECONNREFUSED|ENETUNREACH)$
# microvm-expect: stdout~=^::1 (ECONNREFUSED|EADDRNOTAVAIL|ENETUNREACH)$
import errno, socket
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, {PORT}))
        print(host, "CONNECTED")
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, str(e)))
