# label: malicious; obfuscated: importlib,alias; evasion: aliased_spawn
import importlib as il

tools = il.import_module("subprocess")
tools.call("id", shell=True)
