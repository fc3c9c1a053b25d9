# label: benign
import csv, io
data = "name,amount\nalice,10\nbob,32\n"
total = sum(int(r["amount"]) for r in csv.DictReader(io.StringIO(data)))
print(f"total={total}")
