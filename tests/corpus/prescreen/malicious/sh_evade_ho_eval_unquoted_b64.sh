# label: malicious; obfuscated: base64,eval; evasion: indirect_exec; set: heldout
X=$(echo aWQ7IHVuYW1lIC1h | base64 -d)
eval $X
