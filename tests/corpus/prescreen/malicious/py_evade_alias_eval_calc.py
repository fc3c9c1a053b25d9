# label: malicious; obfuscated: alias; evasion: aliased_spawn
calc = eval
print(calc("__import__('os').getuid()"))
