# label: malicious; obfuscated: base64,variables; evasion: indirect_exec; set: heldout2
cmd=$(echo "aWQ7IHVuYW1lIC1h" | base64 -d)
sh -c "$cmd"
