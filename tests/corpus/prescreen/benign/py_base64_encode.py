# label: benign
import base64, hashlib
payload = b"hello world"
print(base64.b64encode(payload).decode())
print(hashlib.sha256(payload).hexdigest())
