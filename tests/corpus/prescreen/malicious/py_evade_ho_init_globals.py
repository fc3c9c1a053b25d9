# label: malicious; obfuscated: object_graph; evasion: object_graph; set: heldout
class Report:
    pass

Report.__init__.__globals__["__builtins__"]["__import__"]("os").system("uname -a")
