# label: benign
class Shell:
    def do_greet(self, arg):
        print("hello", arg)

    def do_quit(self, arg):
        return True

    def onecmd(self, line):
        cmd, _, arg = line.partition(" ")
        handler = getattr(self, "do_" + cmd, None)
        if handler is None:
            print("unknown command:", cmd)
            return False
        return handler(arg)

sh = Shell()
for line in ["greet world", "dance", "quit"]:
    if sh.onecmd(line):
        break
