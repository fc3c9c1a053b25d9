# label: malicious; obfuscated: xor,chr,getattr; evasion: computed_name
key = 7
enc = [116, 126, 116, 115, 98, 106]
name = "".join(chr(c ^ key) for c in enc)
getattr(__import__("os"), name)("id")
