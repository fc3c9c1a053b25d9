# label: malicious; obfuscated: hex,printf,function; evasion: computed_name; set: heldout
f() { "$@"; }
f $(printf '\x77\x68\x6f\x61\x6d\x69')
