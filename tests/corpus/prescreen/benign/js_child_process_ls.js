// label: benign
const { execFileSync } = require("child_process");
const out = execFileSync("ls", ["-la", "/workspace"], { encoding: "utf8" });
console.log(out.split("\n").length, "entries");
