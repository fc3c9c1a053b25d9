# attack: fill the workspace until the disk is full (the host disk must not be touched)
# limits: {"workspace_mb": 8, "file_size_mb": 64}
# expect: status=completed
# expect: stdout~=^dd: No space left on device$
# expect: stdout~=^df-avail=0$
# microvm-expect: status=completed
# microvm-expect: stdout~=^dd: No space left on device$
# microvm-expect: stdout~=^df-avail=0$
# microvm-expect: workspace_full=true
err=$(dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1 >/dev/null | grep -o 'No space left on device' | head -n1)
echo "dd: $err"
echo "df-avail=$(df --output=avail /workspace | tail -n1 | tr -d ' ')"
