# attack: change the hostname / domain name and the uid (setuid(0)) from inside
# expect: status=completed
# expect: stdout~=^sethostname EPERM$
# expect: stdout~=^setuid0 (EPERM|EINVAL)$
# expect: stdout~=^hostname=toolcage$
import errno, os, socket
try:
    socket.sethostname("pwned")
    print("sethostname OK")
except OSError as e:
    print("sethostname", errno.errorcode[e.errno])
try:
    os.setuid(0)
    print("setuid0 OK")
except OSError as e:
    print("setuid0", errno.errorcode[e.errno])
print("hostname=" + socket.gethostname())
