# label: malicious; obfuscated: object_graph,concat; evasion: object_graph
def helper():
    return 0

b = helper.__globals__["__builtins__"]
imp = b["__imp" + "ort__"] if isinstance(b, dict) else getattr(b, "__imp" + "ort__")
imp("os").system("whoami")
