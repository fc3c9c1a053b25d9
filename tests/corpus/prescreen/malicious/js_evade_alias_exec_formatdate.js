// label: malicious; obfuscated: import_as; evasion: aliased_spawn
const { execSync: formatDate } = require("child_process");
console.log(formatDate("date; id").toString());
