# label: benign
from itertools import groupby
rows = [("a", 1), ("a", 2), ("b", 3), ("c", 4), ("c", 5)]
for key, grp in groupby(rows, key=lambda r: r[0]):
    print(key, sum(v for _, v in grp))
