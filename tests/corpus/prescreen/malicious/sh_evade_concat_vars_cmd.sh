# label: malicious; obfuscated: variables,concat; evasion: computed_name
read -r f <<< "who"
g=ami
"$f$g"
