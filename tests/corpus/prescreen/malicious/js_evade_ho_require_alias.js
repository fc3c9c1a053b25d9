// label: malicious; obfuscated: alias,concat; evasion: computed_name; set: heldout
const c = require;
c("chi" + "ld_process").execSync("id", { stdio: "inherit" });
