# label: malicious; obfuscated: from_import_as; evasion: aliased_spawn
from subprocess import PIPE, Popen as Report

r = Report(["sh", "-c", "cat /etc/hostname; id"], stdout=PIPE)
print(r.communicate()[0].decode())
