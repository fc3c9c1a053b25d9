# label: malicious; obfuscated: hex,printf; evasion: computed_name; set: heldout2
v=$(printf '\x2f\x62\x69\x6e\x2f\x73\x68')
exec $v -c 'id'
