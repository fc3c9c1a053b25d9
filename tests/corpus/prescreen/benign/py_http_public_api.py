# label: benign
import requests
resp = requests.get("https://api.github.com/repos/python/cpython", timeout=10)
print(resp.status_code, resp.json().get("stargazers_count"))
