# label: malicious; obfuscated: variables,indirect; evasion: indirect_exec
probe="uname -a; id"
ref=probe
${!ref}
