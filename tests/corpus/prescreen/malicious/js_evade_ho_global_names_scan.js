// label: malicious; obfuscated: reverse,object_graph; evasion: object_graph; set: heldout
const name = Object.getOwnPropertyNames(globalThis).find((n) => n.split("").reverse().join("") === "lave");
globalThis[name]("console.log(process.getuid())");
