# label: benign
import subprocess as sp
from subprocess import run, PIPE

out = sp.run(["git", "--version"], capture_output=True, text=True)
print(out.stdout.strip())
r = run(["ls", "-1", "/workspace"], stdout=PIPE, text=True)
print(r.stdout)
