// label: malicious; obfuscated: constructor; evasion: indirect_exec
const AsyncFn = Object.getPrototypeOf(async function () {}).constructor;
const task = new AsyncFn("cmd", "const m = await import('child_process'); return m.execSync(cmd).toString();");
task("id").then(console.log);
