# attack: write outside the workspace: the root, /usr, /etc, /root, /home, /proc/sys, /dev
# expect: status=completed
# expect: stdout~=^/x Read-only file system$
# expect: stdout~=^/usr/x Read-only file system$
# expect: stdout~=^/etc/passwd Read-only file system$
# expect: stdout~=^/root/x (Read-only file system|Permission denied)$
# expect: stdout~=^/home/x Read-only file system$
# expect: stdout~=^/proc/sys/kernel/hostname (Read-only file system|Permission denied)$
# expect: stdout~=^/dev/x Read-only file system$
# expect: stdout~=^/usr/bin/python3 (Read-only file system|Permission denied)$
# expect: stdout!~=WROTE
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^/x (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/usr/x (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/etc/passwd (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/root/x (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/home/x (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/proc/sys/kernel/hostname (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/dev/x (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^/usr/bin/python3 (Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout!~=WROTE
for p in /x /usr/x /etc/passwd /root/x /home/x /proc/sys/kernel/hostname /dev/x /usr/bin/python3; do
  if err=$( { echo pwned >>"$p"; } 2>&1 ); then echo "$p WROTE"; else echo "$p ${err##*: }"; fi
done
