// label: benign
const encoded = Buffer.from(JSON.stringify({ user: "alice", scopes: ["read"] })).toString("base64");
console.log(encoded);
const decoded = JSON.parse(Buffer.from(encoded, "base64").toString("utf8"));
console.log(decoded.user, decoded.scopes.join(","));
const hex = Buffer.from("48656c6c6f", "hex").toString();
console.log(hex, atob("aGVsbG8="));
