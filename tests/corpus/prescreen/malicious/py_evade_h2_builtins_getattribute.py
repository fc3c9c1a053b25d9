# label: malicious; obfuscated: concat,object_graph; evasion: object_graph; set: heldout2
ev = __builtins__.__getattribute__("ev" + "al") if not isinstance(__builtins__, dict) else __builtins__["ev" + "al"]
print(ev("__import__('os').getpid()"))
