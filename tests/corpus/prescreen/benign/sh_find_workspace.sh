# label: benign
find /workspace -type f -name '*.log' -mtime +7 -print
find . -name '*.pyc' -delete
du -sh /workspace 2>/dev/null
