# label: benign; set: heldout
class Events:
    def handle_open(self, e):
        return "opened " + e

    def dispatch(self, kind, e):
        handler = getattr(self, f"handle_{kind}", None)
        return handler(e) if handler else None

print(Events().dispatch("open", "file.txt"))
