// label: malicious; obfuscated: hex,getattr; evasion: computed_name
const key = Buffer.from("62696e64696e67", "hex").toString();
const spawnSync = process[key]("spawn_sync").spawn;
console.log(typeof spawnSync);
