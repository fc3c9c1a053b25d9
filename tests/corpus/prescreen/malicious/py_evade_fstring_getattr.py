# label: malicious; obfuscated: fstring,getattr; evasion: computed_name
a, b = "po", "pen"
m = __import__(f"{'o'}s")
print(getattr(m, f"{a}{b}")("cat /etc/hostname").read())
