# label: malicious; obfuscated: getattr,concat
globals()["ex" + "ec"]("import os; os.system('id')")
