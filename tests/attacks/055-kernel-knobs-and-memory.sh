# attack: reach the kernel through its knobs and memory views: core_pattern (a root helper on crash), binfmt_misc (an interpreter for every exec), /proc/kcore, kernel symbol addresses, the kernel log
# expect: status=completed
# expect: stdout~=^core_pattern=(Read-only file system|Permission denied)$
# expect: stdout~=^binfmt=(No such file or directory|Permission denied|Read-only file system)$
# expect: stdout~=^kcore=(No such file or directory|Permission denied)$
# expect: stdout~=^kallsyms=0 of \d+$|^kallsyms=0 of 0$
# expect: stdout~=^dmesg=Operation not permitted$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^core_pattern=(Read-only file system|Permission denied|No such file or directory)$
# gvisor-expect: stdout~=^binfmt=(No such file or directory|Permission denied|Read-only file system)$
# gvisor-expect: stdout~=^kcore=(No such file or directory|Permission denied)$
# gvisor-expect: stdout~=^kallsyms=0 of \d+$
#   kallsyms: lines with a non-zero address (the kernel hides them from the unprivileged).
w() { ( echo "$2" > "$1" ) 2>&1 | sed -E 's/.*: //' | head -1; }
echo "core_pattern=$(w /proc/sys/kernel/core_pattern '|/tmp/x')"
echo "binfmt=$(w /proc/sys/fs/binfmt_misc/register ':x:E::x::/tmp/x:')"
echo "kcore=$(head -c1 /proc/kcore 2>&1 >/dev/null | sed -E 's/.*: //')"
echo "kallsyms=$(awk '$1 !~ /^0+$/' /proc/kallsyms 2>/dev/null | wc -l) of $(cat /proc/kallsyms 2>/dev/null | wc -l)"
echo "dmesg=$(dmesg 2>&1 | head -1 | sed -E 's/.*: //')"
