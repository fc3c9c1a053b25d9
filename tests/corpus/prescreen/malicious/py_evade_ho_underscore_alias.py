# label: malicious; obfuscated: import_as,concat; evasion: computed_name; set: heldout
import os as _
getattr(_, "p" + "open")("cat /etc/hostname").read()
