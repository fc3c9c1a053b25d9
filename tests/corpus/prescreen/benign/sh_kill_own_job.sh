# label: benign
sleep 30 &
pid=$!
kill "$pid"
wait "$pid" 2>/dev/null
echo "stopped $pid"
