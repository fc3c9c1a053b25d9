# label: malicious; obfuscated: reversed,xargs; evasion: computed_name; set: heldout2
rev <<< 'hsab' | xargs -I{} {} -c id
