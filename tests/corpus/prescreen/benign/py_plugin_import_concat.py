# label: benign; set: heldout
import importlib

def load(name):
    return importlib.import_module("encodings." + name)

for n in ("ascii", "utf_8"):
    print(load(n).__name__)
mods = [__import__(m) for m in ("json", "csv")]
print([m.__name__ for m in mods])
