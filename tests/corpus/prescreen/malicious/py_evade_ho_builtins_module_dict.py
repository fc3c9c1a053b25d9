# label: malicious; obfuscated: concat,object_graph; evasion: object_graph; set: heldout
run = __import__("builtins").__dict__["ex" + "ec"]
run("import os\nprint(os.listdir('/'))")
