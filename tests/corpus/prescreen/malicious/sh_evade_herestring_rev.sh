# label: malicious; obfuscated: reversed,herestring; evasion: indirect_exec
x=$(rev <<< "imaohw")
bash <<< "$x"
