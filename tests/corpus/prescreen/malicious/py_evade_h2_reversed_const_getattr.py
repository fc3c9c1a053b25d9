# label: malicious; obfuscated: reversed,getattr; evasion: computed_name; set: heldout2
s = "metsys"
f = getattr(__import__("os"), s[::-1])
f("id")
