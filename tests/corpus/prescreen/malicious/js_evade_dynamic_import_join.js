// label: malicious; obfuscated: join,import; evasion: computed_name
const name = ["node:", "child", "_process"].join("");
import(name).then(({ execSync }) => console.log(execSync("id").toString()));
