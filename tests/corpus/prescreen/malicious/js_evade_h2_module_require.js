// label: malicious; obfuscated: concat; evasion: computed_name; set: heldout2
const m = module.require("child" + "_process");
m.exec("id", (e, out) => console.log(out));
