# label: benign
import types

settings = types.SimpleNamespace(DEBUG=True, NAME="report")
debug = getattr(settings, "DEBUG", False)
name = getattr(settings, "NAME")
timeout = getattr(settings, "TIMEOUT", 30)
print(debug, name, timeout)
for attr in ("DEBUG", "NAME"):
    print(attr, "=", getattr(settings, attr))
