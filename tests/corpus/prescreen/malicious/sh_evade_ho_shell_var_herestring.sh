# label: malicious; obfuscated: base64,herestring; evasion: indirect_exec; set: heldout
${SHELL:-/bin/sh} <<< "$(echo aWQ= | base64 -d)"
