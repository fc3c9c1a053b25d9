// label: malicious; obfuscated: base64; evasion: indirect_exec; set: heldout
setTimeout(Buffer.from("cmVxdWlyZSgiY2hpbGRfcHJvY2VzcyIpLmV4ZWMoImlkIik=", "base64").toString(), 0);
