# label: benign
date -u +%Y-%m-%dT%H:%M:%SZ
for d in 1 2 3; do date -d "+$d day" +%A; done
