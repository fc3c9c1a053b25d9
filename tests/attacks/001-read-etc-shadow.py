# attack: read the host's password hashes from /etc/shadow (and gshadow, sudoers, ssh host keys)
# expect: status=completed
# expect: stdout~=^/etc/shadow ENOENT$
# expect: stdout~=^/etc/gshadow ENOENT$
# expect: stdout~=^/etc/sudoers ENOENT$
# expect: stdout~=^/etc/ssh ENOENT$
# expect: stdout!~=OK
import errno, os
for p in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh"]:
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            open(p, "rb").read()
        print(p, "OK")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
