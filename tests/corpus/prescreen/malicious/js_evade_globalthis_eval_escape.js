// label: malicious; obfuscated: hex,getattr; evasion: computed_name
const e = globalThis["\x65\x76\x61\x6c"];
e("require('child_process').execSync('id')");
