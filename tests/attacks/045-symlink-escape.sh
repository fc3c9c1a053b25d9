# attack: symlink and hard-link tricks in the workspace pointing at host paths and at PID 1's root
# expect: status=completed
# expect: stdout~=^shadow-link=No such file or directory$
# expect: stdout~=^pid1-root=(Permission denied|No such file or directory)$
# expect: stdout~=^hardlink-passwd=(Invalid cross-device link|Operation not permitted)$
# expect: stdout~=^proc-self-root=/+workspace$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^shadow-link=No such file or directory$
# gvisor-expect: stdout~=^pid1-root=(Permission denied|No such file or directory|Invalid argument)$
# gvisor-expect: stdout~=^hardlink-passwd=(Invalid cross-device link|Operation not permitted)$
# gvisor-expect: stdout~=^proc-self-root=/+workspace$
cd /workspace
ln -s /etc/shadow shadow; ln -s / rootlink; ln -s /proc/1/root pid1root
echo "shadow-link=$(cat shadow 2>&1 | sed 's/.*: //')"
echo "pid1-root=$(ls pid1root/ 2>&1 | head -n1 | sed 's/.*: //')"
echo "hardlink-passwd=$(ln /etc/passwd hl 2>&1 | sed 's/.*: //')"
echo "proc-self-root=$(cd /proc/self/root/workspace && pwd -P)"
