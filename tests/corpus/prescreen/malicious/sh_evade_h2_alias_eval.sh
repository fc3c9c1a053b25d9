# label: malicious; obfuscated: alias,base64; evasion: indirect_exec; set: heldout2
shopt -s expand_aliases
alias ll='eval "$(echo aWQ= | base64 -d)"'
ll
