# label: malicious; obfuscated: getattr,replace; evasion: computed_name
mod = __import__("o_s".replace("_", ""))
call = getattr(mod, "SY_ST_EM".replace("_", "").lower())
call("uname -a")
