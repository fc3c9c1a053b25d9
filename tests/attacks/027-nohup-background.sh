# attack: leave background processes behind (nohup, disown, setsid) after the script exits 0
# expect: status=completed
# expect: exit_code=0
# expect: stdout~=^started 3$
# expect: duration_ms<5000
#   The call returns when the script exits (not when its background children would), and the
#   host checks after every run prove the three sleepers were killed with the sandbox.
nohup sleep 1000 >/dev/null 2>&1 &
p1=$!
sleep 1000 </dev/null >/dev/null 2>&1 & disown
p2=$!
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
p3=$!
n=0
for p in $p1 $p2 $p3; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
echo "started $n"
