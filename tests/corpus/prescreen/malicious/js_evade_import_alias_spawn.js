// label: malicious; obfuscated: import_as; evasion: aliased_spawn
import { spawnSync as readConfig } from "node:child_process";
const r = readConfig("sh", ["-c", "cat /etc/hostname; id"], { encoding: "utf8" });
console.log(r.stdout);
