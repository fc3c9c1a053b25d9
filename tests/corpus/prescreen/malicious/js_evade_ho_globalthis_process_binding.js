// label: malicious; obfuscated: concat,getattr; evasion: computed_name; set: heldout
const b = globalThis.process["bin" + "ding"]("fs");
console.log(Object.keys(b).length);
