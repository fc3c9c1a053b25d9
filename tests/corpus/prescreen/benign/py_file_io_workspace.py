# label: benign
from pathlib import Path
out = Path("/workspace/report.txt")
out.write_text("\n".join(f"line {i}" for i in range(10)))
print(len(out.read_text().splitlines()), "lines written")
