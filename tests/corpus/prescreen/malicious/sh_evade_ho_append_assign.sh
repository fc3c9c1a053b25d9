# label: malicious; obfuscated: variables; evasion: computed_name; set: heldout
c=w
c+=h
c+=o
c+=ami
$c
