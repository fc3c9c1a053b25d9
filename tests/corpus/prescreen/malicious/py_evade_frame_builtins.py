# label: malicious; obfuscated: object_graph,join; evasion: object_graph
import inspect

frame = inspect.currentframe()
bi = frame.f_globals["__builtins__"]
name = "".join(["ex", "ec"])
run = bi[name] if isinstance(bi, dict) else vars(bi)[name]
run("import socket; print(socket.gethostname())")
