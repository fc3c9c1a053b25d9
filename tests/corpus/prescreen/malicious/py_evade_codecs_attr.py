# label: malicious; obfuscated: rot13,getattr; evasion: computed_name
import codecs
import subprocess

fn = getattr(subprocess, codecs.decode("purpx_bhgchg", "rot13"))
print(fn(["id"]))
