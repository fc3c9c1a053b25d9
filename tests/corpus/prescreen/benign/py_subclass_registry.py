# label: benign
class Exporter:
    fmt = None

    def export(self, rows):
        raise NotImplementedError

class CsvExporter(Exporter):
    fmt = "csv"

    def export(self, rows):
        return "\n".join(",".join(map(str, r)) for r in rows)

class TsvExporter(Exporter):
    fmt = "tsv"

    def export(self, rows):
        return "\n".join("\t".join(map(str, r)) for r in rows)

registry = {cls.fmt: cls for cls in Exporter.__subclasses__()}
print(registry["csv"]().export([[1, 2], [3, 4]]))
