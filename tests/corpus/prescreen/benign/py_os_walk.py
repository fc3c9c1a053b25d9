# label: benign
import os
for root, dirs, files in os.walk("/workspace"):
    for f in files:
        print(os.path.join(root, f), os.path.getsize(os.path.join(root, f)))
