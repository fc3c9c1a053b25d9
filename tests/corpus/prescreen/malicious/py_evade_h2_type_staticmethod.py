# label: malicious; obfuscated: type,alias; evasion: aliased_spawn; set: heldout2
Tool = type("Tool", (), {"run": staticmethod(__import__("os").system)})
Tool.run("id")
