# label: benign
import base64
import json

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
data = base64.b64decode(PNG_1PX)
with open("pixel.png", "wb") as f:
    f.write(data)
print(len(data), data[:8])
blob = base64.b64decode("eyJ1c2VyIjogImFsaWNlIiwgInJvbGUiOiAiYW5hbHlzdCJ9").decode()
print(json.loads(blob)["user"])
