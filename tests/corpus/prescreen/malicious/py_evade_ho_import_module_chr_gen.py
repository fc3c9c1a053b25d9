# label: malicious; obfuscated: chr,importlib; evasion: computed_name; set: heldout
import importlib
m = importlib.import_module("".join(chr(x) for x in [115, 117, 98, 112, 114, 111, 99, 101, 115, 115]))
m.Popen(["id"]).wait()
