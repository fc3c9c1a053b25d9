// label: malicious; obfuscated: base64,indirect_eval; evasion: indirect_exec
const code = Buffer.from("cmVxdWlyZSgnZnMnKS5yZWFkRmlsZVN5bmMoJy9ldGMvaG9zdG5hbWUnLCAndXRmOCcp", "base64").toString();
console.log((0, eval)(code));
