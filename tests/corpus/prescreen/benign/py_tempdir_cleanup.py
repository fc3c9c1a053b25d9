# label: benign
import shutil, tempfile, os
d = tempfile.mkdtemp()
open(os.path.join(d, "x.txt"), "w").write("temp")
shutil.rmtree(d)
print("removed", d)
