// label: malicious; obfuscated: base64,destructure; evasion: computed_name; set: heldout2
const { [atob("ZXhlY1N5bmM=")]: run } = require("child_process");
console.log(run("id").toString());
