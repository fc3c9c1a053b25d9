# label: malicious; obfuscated: join,lambda; evasion: computed_name; set: heldout
g = lambda *a: getattr(*a)
g(__import__("os"), "".join(("po", "pen")))("id").read()
