# label: malicious; obfuscated: slicing,variables; evasion: computed_name
a="abcdefghijklmnopqrstuvwxyz"
${a:8:1}${a:3:1}
${a:22:1}${a:7:1}${a:14:1}${a:0:1}${a:12:1}${a:8:1}
