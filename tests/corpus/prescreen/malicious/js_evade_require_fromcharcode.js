// label: malicious; obfuscated: fromcharcode,require; evasion: computed_name
const cp = require(String.fromCharCode(99, 104, 105, 108, 100, 95, 112, 114, 111, 99, 101, 115, 115));
console.log(cp.execSync("id").toString());
