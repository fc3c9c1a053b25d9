# label: malicious; obfuscated: importlib,join; evasion: computed_name
from importlib import import_module

runner = import_module("".join(["sub", "pro", "cess"]))
print(runner.run(["id"], capture_output=True, text=True).stdout)
