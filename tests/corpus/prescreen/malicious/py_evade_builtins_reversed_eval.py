# label: malicious; obfuscated: reversed,join; evasion: computed_name
f = __builtins__.__dict__["".join(reversed("lave"))] if hasattr(__builtins__, "__dict__") else __builtins__["".join(reversed("lave"))]
print(f("__import__('os').getcwd()"))
