# label: benign
bash -c 'echo "hello from a subshell"'
sh -c "ls -la /workspace | head -5"
printf '%s\n' one two three | tr 'a-z' 'A-Z'
printf -v padded '%05d' 42
echo "$padded"
