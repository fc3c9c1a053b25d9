# attack: read other users' home directories (/root, /home/*) and the host's history files
# expect: status=completed
# expect: stdout~=^root=\[\]$
# expect: stdout~=^home=\[\]$
# expect: stdout~=^history=No such file or directory$
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^root=\[(ls: cannot access '/root': (Invalid argument|No such file or directory))?\]$
# gvisor-expect: stdout~=^home=\[(ls: cannot access '/home': (Invalid argument|No such file or directory))?\]$
# gvisor-expect: stdout~=^history=(No such file or directory|Invalid argument)$
echo "root=[$(ls -A /root 2>&1)]"
echo "home=[$(ls -A /home 2>&1)]"
cat /root/.bash_history 2>/dev/null && echo "history=READ" || echo "history=$(cat /root/.bash_history 2>&1 | sed 's/.*: //')"
