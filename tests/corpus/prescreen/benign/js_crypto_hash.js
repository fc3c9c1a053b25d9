// label: benign
const crypto = require("crypto");
const h = crypto.createHash("sha256").update("hello").digest("hex");
console.log(h, crypto.randomUUID().length);
