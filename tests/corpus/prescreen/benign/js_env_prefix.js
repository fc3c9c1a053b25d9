// label: benign; set: heldout
const prefix = "APP_";
const port = process.env[prefix + "PORT"] || "8080";
const host = process.env["APP_" + "HOST"] || "localhost";
console.log(`${host}:${port}`);
