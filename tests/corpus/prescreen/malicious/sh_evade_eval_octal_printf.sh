# label: malicious; obfuscated: octal,printf,eval; evasion: indirect_exec
cmd=$(printf '\%o\%o' 105 100 | xargs -0 printf)
eval "$cmd"
