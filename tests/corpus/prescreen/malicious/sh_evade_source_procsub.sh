# label: malicious; obfuscated: base64,process_substitution; evasion: indirect_exec
source <(echo "aWQ7IGNhdCAvZXRjL2hvc3RuYW1l" | base64 -d)
