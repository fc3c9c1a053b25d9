# label: malicious; obfuscated: base64,variables; evasion: indirect_exec
payload="aWQ7IHVuYW1lIC1h"
echo "$payload" | base64 --decode | bash
