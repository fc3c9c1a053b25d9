# attack: open a raw IP socket (ICMP, spoofing)
# expect: status=completed
# expect: stdout~=^raw EPERM$
# expect: violation=socket
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^raw EPERM$
#   In a session the same, but no violation= line: a session call reports no
#   policy_violations (api/sessions.c, call_result); the EPERM lines show the refusal.
# session-expect: status=completed
# session-expect: stdout~=^raw EPERM$
import errno, socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("raw OPEN")
except OSError as e:
    print("raw", errno.errorcode[e.errno])
