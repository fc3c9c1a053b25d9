# label: malicious; obfuscated: alias; evasion: aliased_spawn
import os

helper = os.system
helper("id; uname -a")
