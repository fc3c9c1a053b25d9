# attack: leave background processes behind (nohup, disown, setsid) after the script exits 0
# expect: status=completed
# expect: exit_code=0
nohup sleep 1000 >/dev/null 2>&1 &
sleep 1000 </dev/null >/dev/null 2>&1 & disown
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo started
