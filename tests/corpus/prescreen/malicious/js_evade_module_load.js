// label: malicious; obfuscated: concat,require; evasion: object_graph
const load = module.constructor._load;
const c = load("child" + "_process");
c.execFileSync("/bin/sh", ["-c", "id"], { stdio: "inherit" });
