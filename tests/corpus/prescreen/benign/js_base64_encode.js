// label: benign
const encoded = Buffer.from("hello world").toString("base64");
const decoded = Buffer.from(encoded, "base64").toString("utf8");
console.log(encoded, decoded, btoa("abc"), atob("YWJj"));
