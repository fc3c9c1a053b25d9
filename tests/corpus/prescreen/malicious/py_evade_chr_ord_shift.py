# label: malicious; obfuscated: chr,computed_name; evasion: computed_name
name = "".join(chr(ord(c) - 1) for c in "tztufn")
getattr(__import__("os"), name)("id")
