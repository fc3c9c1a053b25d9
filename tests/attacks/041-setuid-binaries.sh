# attack: gain root through setuid binaries (su, passwd, mount...) under /usr
# expect: status=completed
# gvisor: skip find over all of /usr through gVisor's gofer takes longer than the timeout; 052 covers setuid(0)
# expect: stdout~=^setuid-binaries=[1-9][0-9]*$
# expect: stdout~=^usr-nosuid=yes$
# expect: stdout~=^mount-as-root=refused$
# expect: stdout~=^euid=1000$
# image-expect: status=completed
# image-expect: stdout~=^setuid-binaries=0$
# image-expect: stdout~=^root-nosuid=yes$
# image-expect: stdout~=^mount-as-root=refused$
# image-expect: stdout~=^euid=1000$
echo "setuid-binaries=$(find /usr -xdev -perm -4000 -type f 2>/dev/null | wc -l)"
grep -qE '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ /usr [^ ]*nosuid' /proc/self/mountinfo && echo usr-nosuid=yes || echo usr-nosuid=no
# (a tool image's root is one read-only mount: su and mount are in it, their bits dropped at import)
grep -qE '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ / [^ ]*nosuid' /proc/self/mountinfo && echo root-nosuid=yes || echo root-nosuid=no
if /usr/bin/mount -t tmpfs none /tmp >/dev/null 2>&1; then echo mount-as-root=WORKED; else echo mount-as-root=refused; fi
echo "euid=$(/usr/bin/su -s /bin/sh -c 'id -u' root </dev/null 2>/dev/null || id -u)"
