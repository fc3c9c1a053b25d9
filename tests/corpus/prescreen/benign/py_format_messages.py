# label: benign
import sys

name, count = "orders", 42
print("{}: {}".format(name, count))
print("%s has %d rows" % (name, count))
label = f"{name}-{count:04d}"
print(label)
mod = sys.modules[__name__]
print(mod.__name__, "numpy" in sys.modules)
