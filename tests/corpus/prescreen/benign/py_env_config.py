# label: benign
import os
debug = os.environ.get("DEBUG", "0") == "1"
workers = int(os.environ.get("WORKERS", "4"))
print({"debug": debug, "workers": workers})
