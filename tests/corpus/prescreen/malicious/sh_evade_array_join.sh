# label: malicious; obfuscated: array,variables; evasion: computed_name
parts=(una me)
"${parts[0]}${parts[1]}" -a
