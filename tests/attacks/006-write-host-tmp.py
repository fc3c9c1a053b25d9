# attack: drop a file into the host's /tmp (the sandbox's /tmp must be a private tmpfs)
# expect: status=completed
# expect: stdout~=^written$
# host: absent={PWNED}
# microvm-expect: status=completed
# microvm-expect: stdout~=^written$
open("{PWNED}", "w").write("pwned\n")
print("written")
