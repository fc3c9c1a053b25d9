// label: benign
const path = require("path");
const fs = require("fs");
const file = path.join(__dirname, "data.json");
fs.writeFileSync(file, JSON.stringify({ rows: [1, 2, 3] }));
const data = require(file);
console.log(data.rows.length);
const mods = ["os", "util"].map((m) => require(m));
console.log(typeof mods[0].cpus);
