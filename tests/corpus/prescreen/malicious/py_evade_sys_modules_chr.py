# label: malicious; obfuscated: chr,getattr; evasion: computed_name
import os
import sys

m = sys.modules["".join(map(chr, [111, 115]))]
print(getattr(m, "po" + "pen")("uname -a").read())
