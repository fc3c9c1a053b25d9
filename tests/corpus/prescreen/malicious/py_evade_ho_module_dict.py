# label: malicious; obfuscated: concat; evasion: computed_name; set: heldout
import os
os.__dict__["sys" + "tem"]("whoami")
