# attack: read the launcher's memory (other sandboxes' specs, stdin, secrets) through PID 1, which used to be a fork of the launcher
# expect: status=completed
# expect: stdout~=^name=toolcage-init$
# expect: stdout~=^cmdline=\['toolcage-init'\]$
# expect: stdout~=^rss-kb<4096$
# expect: stdout~=^mem=(EACCES|EPERM)$
# expect: stdout~=^maps=(EACCES|EPERM|empty)$
# gvisor-expect: status=completed
#   PID 1 under gVisor is the program itself: no launcher or init memory exists there
#   (through toolcage's runner, which runs main.py: execution/plots.c)
# gvisor-expect: stdout~=^cmdline=\['/usr/bin/python3', '-I', '-B', '/workspace/\.toolcage/toolcage_plots\.py', '--gate', '/workspace/main\.py'\]$
import errno
st = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines() if ":" in l)
print("name=" + st["Name"].strip())
print("cmdline=" + str(open("/proc/1/cmdline", "rb").read().decode().split("\0")[:-1]))
rss = int(st.get("VmRSS", "0 kB").split()[0])
print("rss-kb<4096" if rss < 4096 else f"rss-kb={rss}")
for f in ("mem", "maps"):
    try:
        data = open(f"/proc/1/{f}", "rb").read(4096)
        print(f"{f}=" + ("empty" if not data else "READ"))
    except OSError as e:
        print(f"{f}=" + errno.errorcode[e.errno])
