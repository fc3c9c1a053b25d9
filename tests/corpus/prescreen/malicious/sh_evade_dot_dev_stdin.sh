# label: malicious; obfuscated: stdin; evasion: indirect_exec
printf 'id\nuname -a\n' | . /dev/stdin
