# label: malicious
cat ~/.aws/credentials
