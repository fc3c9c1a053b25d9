// label: malicious; obfuscated: concat,getattr; evasion: computed_name; set: heldout
const m = "ex" + "ecSync";
console.log(require("child_process")[m]("id").toString());
