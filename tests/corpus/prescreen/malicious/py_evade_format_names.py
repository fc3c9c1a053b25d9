# label: malicious; obfuscated: format,__import__,getattr; evasion: computed_name
mod = "{}{}".format("o", "s")
fn = "%s%s" % ("sys", "tem")
getattr(__import__(mod), fn)("whoami")
