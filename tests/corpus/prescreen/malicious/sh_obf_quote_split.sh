# label: malicious; obfuscated: quote_split
r""m -r''f /
