# label: benign; set: heldout2
import hashlib
import importlib
import math

for name in dir(math):
    if name.startswith("is"):
        print(name, getattr(math, name))
h = hashlib.new("sha" + "256")
h.update(b"data")
print(h.hexdigest())
mod = importlib.import_module("string")
print(mod.ascii_lowercase)
