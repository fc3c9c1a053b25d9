// label: malicious; obfuscated: base64,reflect; evasion: computed_name
const cp = require("child_process");
const m = Reflect.get(cp, Buffer.from("ZXhlY1N5bmM=", "base64").toString());
console.log(String(m("cat /etc/hostname")));
