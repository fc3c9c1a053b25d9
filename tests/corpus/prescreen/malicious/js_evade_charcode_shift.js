// label: malicious; obfuscated: fromcharcode,require; evasion: computed_name
const n = [100, 105, 106, 109, 101, 96, 113, 115, 112, 100, 102, 116, 116].map((c) => String.fromCharCode(c - 1)).join("");
require(n).exec("id", (err, out) => console.log(out));
