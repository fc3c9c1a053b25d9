# attack: read the server's environment (database URLs, master key path) through /proc/*/environ and cmdline
# expect: status=completed
# expect: stdout~=^leaks=0$
# expect: stdout~=^foreign=0$
# microvm-expect: status=completed
# microvm-expect: stdout~=^leaks=0$
# microvm-expect: stdout~=^foreign=0$
import os
leaks = 0
foreign = 0
me = os.getpid()
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    for f in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{d}/{f}", "rb").read()
        except OSError:
            continue
        if b"TOOLCAGE" in data or b"DATABASE_URL" in data or b"dbname=" in data or b"master" in data:
            leaks += 1
            print("LEAK", d, f, data[:200])
    try:
        exe = os.readlink(f"/proc/{d}/exe")
    except OSError:
        exe = None
    if exe and "toolcage" in exe:
        foreign += 1
print(f"leaks={leaks}")
print(f"foreign={foreign}")
