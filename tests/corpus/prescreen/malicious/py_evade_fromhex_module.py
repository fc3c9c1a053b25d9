# label: malicious; obfuscated: hex,__import__; evasion: computed_name
tool = __import__(bytes.fromhex("73756270726f63657373").decode())
print(tool.getoutput("id"))
