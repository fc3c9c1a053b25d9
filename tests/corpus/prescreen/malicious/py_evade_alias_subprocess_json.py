# label: malicious; obfuscated: import_as; evasion: aliased_spawn
import subprocess as json

data = json.check_output(["id"]).decode()
print(data)
