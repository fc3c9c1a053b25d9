# label: benign
from datetime import date, timedelta
start = date(2024, 1, 1)
days = [start + timedelta(days=7 * i) for i in range(5)]
print(", ".join(d.isoformat() for d in days))
