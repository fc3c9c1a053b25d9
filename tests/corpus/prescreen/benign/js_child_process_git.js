// label: benign
const { execFile, spawnSync } = require("child_process");
const cp = require("child_process");
execFile("git", ["--version"], (err, out) => console.log(err ? "no git" : out.trim()));
const r = spawnSync("ls", ["-1", "."], { encoding: "utf8" });
console.log(r.stdout);
console.log(typeof cp.exec);
