# label: benign
import base64, json
blob = base64.b64decode("eyJ1c2VyIjogImFsaWNlIiwgInNjb3JlIjogNDJ9")
print(json.loads(blob)["score"])
