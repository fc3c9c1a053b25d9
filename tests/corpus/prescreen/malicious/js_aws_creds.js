// label: malicious
const fs = require("fs");
console.log(fs.readFileSync(process.env.HOME + "/.aws/credentials", "utf8"));
