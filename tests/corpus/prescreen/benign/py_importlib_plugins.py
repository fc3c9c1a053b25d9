# label: benign
import importlib

json = importlib.import_module("json")
print(json.dumps({"ok": True}))

def load_codec(name):
    try:
        return importlib.import_module(f"encodings.{name}")
    except ImportError:
        return None

for n in ["utf_8", "latin_1", "nope"]:
    print(n, load_codec(n) is not None)
