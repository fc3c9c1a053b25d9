# label: malicious; obfuscated: base64,nested_interpreter; evasion: indirect_exec
node -e "eval(Buffer.from('cmVxdWlyZSgiY2hpbGRfcHJvY2VzcyIpLmV4ZWNTeW5jKCJpZCIsIHtzdGRpbzogImluaGVyaXQifSk=', 'base64').toString())"
