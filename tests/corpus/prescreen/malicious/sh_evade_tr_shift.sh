# label: malicious; obfuscated: tr,substitution; evasion: computed_name
c=$(echo 'hc' | tr 'a-y' 'b-z')
$c
