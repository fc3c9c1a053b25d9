// label: malicious; obfuscated: constructor; evasion: object_graph; set: heldout2
const proc = Function.prototype.constructor("return process")();
console.log(proc.env.HOME, proc.pid);
