# attack: hard-link a setuid binary (su, passwd, mount) into the workspace or /tmp, to keep or exploit it after an update
# expect: status=completed
# expect: stdout~=^link /usr/bin/su (Invalid cross-device link|Operation not permitted)$
# expect: stdout~=^tmplink /usr/bin/su (Invalid cross-device link|Operation not permitted)$
# expect: stdout!~= OK$
# gvisor-expect: status=completed
# gvisor-expect: stdout!~= OK$
for b in /usr/bin/su /usr/bin/passwd /usr/bin/mount; do
  [ -e "$b" ] || continue
  out=$(ln "$b" /workspace/link 2>&1) && echo "link $b OK" || echo "link $b ${out##*: }"
  out=$(ln "$b" /tmp/link 2>&1) && echo "tmplink $b OK" || echo "tmplink $b ${out##*: }"
done
