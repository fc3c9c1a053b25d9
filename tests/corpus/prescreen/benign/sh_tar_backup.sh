# label: benign
set -euo pipefail
mkdir -p /workspace/backup
tar -czf /workspace/backup/data.tar.gz -C /workspace data 2>/dev/null || echo "nothing to back up"
ls -la /workspace/backup
