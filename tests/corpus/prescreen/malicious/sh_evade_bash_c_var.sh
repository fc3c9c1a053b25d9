# label: malicious; obfuscated: variables,base64; evasion: indirect_exec
enc="Y2F0IC9ldGMvaG9zdG5hbWU7IGlk"
bash -c "$(base64 -d <<< "$enc")"
