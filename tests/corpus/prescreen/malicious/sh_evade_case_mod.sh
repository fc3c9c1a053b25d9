# label: malicious; obfuscated: case,variables; evasion: computed_name
c="WHOAMI"
${c,,}
