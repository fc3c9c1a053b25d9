# label: benign
def handle_create(item):
    return f"created {item}"

def handle_delete(item):
    return f"deleted {item}"

def dispatch(kind, item):
    fn = globals().get("handle_" + kind)
    if fn is None:
        raise ValueError(kind)
    return fn(item)

print(dispatch("create", "report.csv"))
print(sorted(k for k in globals() if k.startswith("handle_")))
