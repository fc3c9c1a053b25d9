// label: malicious; obfuscated: reverse,spread; evasion: computed_name; set: heldout2
const k = [..."cexe"].reverse().join("") + "Sync";
console.log(require("child_process")[k]("id").toString());
