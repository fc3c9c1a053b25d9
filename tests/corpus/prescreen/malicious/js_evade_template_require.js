// label: malicious; obfuscated: template,require; evasion: computed_name
const mod = `${"chi"}ld_${"pro"}cess`;
const { [`exec${"Sync"}`]: go } = require(mod);
console.log(go("id").toString());
