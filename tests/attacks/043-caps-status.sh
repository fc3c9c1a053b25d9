# attack: look for capabilities or a missing no_new_privs/seccomp in /proc/self/status
# expect: status=completed
# expect: stdout~=^CapInh:\s+0000000000000000$
# expect: stdout~=^CapPrm:\s+0000000000000000$
# expect: stdout~=^CapEff:\s+0000000000000000$
# expect: stdout~=^CapBnd:\s+0000000000000000$
# expect: stdout~=^CapAmb:\s+0000000000000000$
# expect: stdout~=^NoNewPrivs:\s+1$
# expect: stdout~=^Seccomp:\s+2$
# expect: stdout~=^Uid:\s+1000\s+1000\s+1000\s+1000$
# expect: stdout~=^Groups:\s*$
grep -E '^(Cap|NoNewPrivs|Seccomp:|Uid|Gid|Groups)' /proc/self/status
