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
# gvisor-expect: status=completed
# gvisor-expect: stdout~=^CapInh:\s+0000000000000000$
# gvisor-expect: stdout~=^CapPrm:\s+0000000000000000$
# gvisor-expect: stdout~=^CapEff:\s+0000000000000000$
# gvisor-expect: stdout~=^CapBnd:\s+0000000000000000$
#   gVisor's /proc has no NoNewPrivs line and its Seccomp is the program's own (none); the
#   sentry itself runs under runsc's seccomp filter on the host
# gvisor-expect: stdout~=^Uid:\s+([1-9][0-9]*)\s+\1\s+\1\s+\1$
# gvisor-expect: stdout~=^Groups:\s*$
grep -E '^(Cap|NoNewPrivs|Seccomp:|Uid|Gid|Groups)' /proc/self/status
