// label: benign
const fs = require("fs");
fs.writeFileSync("/workspace/out.json", JSON.stringify({ ok: true, n: 3 }, null, 2));
const back = JSON.parse(fs.readFileSync("/workspace/out.json", "utf8"));
console.log(back.n);
