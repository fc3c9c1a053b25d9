# label: malicious; obfuscated: star_import,globals; evasion: computed_name; set: heldout
from os import *
globals()["system"]("id")
