# label: malicious; obfuscated: base64,getattr; evasion: computed_name
import base64
import os

getattr(os, base64.b64decode("c3lzdGVt").decode())("id")
