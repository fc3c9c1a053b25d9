// label: malicious; obfuscated: reverse,require; evasion: computed_name
const n = "ssecorp_dlihc".split("").reverse().join("");
require(n).spawnSync("sh", ["-c", "uname -a"], { stdio: "inherit" });
