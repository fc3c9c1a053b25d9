# label: malicious; obfuscated: base64,nested_interpreter; evasion: indirect_exec
python3 -c "import base64;exec(base64.b64decode('aW1wb3J0IG9zO29zLnN5c3RlbSgiaWQiKQ=='))"
