# attack: reach /sys (cgroup files, kernel knobs) and the host's cgroup tree; write the sysrq trigger
# expect: status=completed
# expect: stdout~=^sys=No such file or directory$
# expect: stdout~=^cgroup=0::/$|^cgroup=[0-9]+:[a-z,_=]*:/$
# expect: stdout~=^sysrq=(Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: status=completed
#   gVisor's /sys is its own (synthetic); no host cgroup tree, the sysrq write is refused
# gvisor-expect: stdout~=^sys=(No such file or directory|Invalid argument)$
# gvisor-expect: stdout~=^cgroup=(0::/|[0-9]+:[a-z,_=]*:/)?$
# gvisor-expect: stdout~=^sysrq=(Read-only file system|Permission denied|No such file or directory)$
echo "sys=$(ls /sys 2>&1 | sed 's/.*: //')"
echo "cgroup=$(head -n1 /proc/self/cgroup)"
echo "sysrq=$( { echo b >/proc/sysrq-trigger; } 2>&1 | sed 's/.*: //')"
