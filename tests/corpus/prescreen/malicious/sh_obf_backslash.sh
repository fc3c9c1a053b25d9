# label: malicious; obfuscated: backslash
r\m -r\f /
