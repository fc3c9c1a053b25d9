# label: malicious; obfuscated: object_graph,reversed,concat; evasion: object_graph
import builtins

key = "__" + "tropmi"[::-1] + "__"
sp = vars(builtins)[key]("subprocess")
print(sp.check_output(["cat", "/etc/hostname"]).decode())
