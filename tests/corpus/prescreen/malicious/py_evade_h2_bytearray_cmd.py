# label: malicious; obfuscated: char_codes; evasion: computed_name; set: heldout2
import os
cmd = bytearray([105, 100, 59, 32, 117, 110, 97, 109, 101, 32, 45, 97]).decode()
os.system(cmd)
