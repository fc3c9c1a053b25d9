// label: benign
const path = require("path");
const p = path.join("/workspace", "data", "file.txt");
console.log(path.basename(p), path.extname(p), path.dirname(p));
