# label: malicious; obfuscated: array,ifs; evasion: computed_name; set: heldout
a=(w h o a m i)
IFS=
"${a[*]}"
