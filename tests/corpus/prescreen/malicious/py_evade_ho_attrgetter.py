# label: malicious; obfuscated: concat,attrgetter; evasion: computed_name; set: heldout
op = __import__("operator")
f = op.attrgetter("sys" "tem")
f(__import__("os"))("id")
