# label: malicious; obfuscated: concat; evasion: computed_name; set: heldout
import os
import sys
sys.modules.get("o" + "s").system("id")
