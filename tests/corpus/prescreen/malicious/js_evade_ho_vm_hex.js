// label: malicious; obfuscated: hex; evasion: indirect_exec; set: heldout
const vm = require("vm");
const p = "70726f636573732e656e76";
console.log(vm.runInThisContext(Buffer.from(p, "hex").toString()));
