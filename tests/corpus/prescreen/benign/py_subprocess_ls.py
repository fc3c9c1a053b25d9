# label: benign
import subprocess
result = subprocess.run(["ls", "-la", "/workspace"], capture_output=True, text=True)
print(result.stdout)
