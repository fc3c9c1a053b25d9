# label: benign
import statistics
values = [2.5, 3.1, 4.7, 5.0, 3.3, 2.9]
print("mean", round(statistics.mean(values), 3))
print("stdev", round(statistics.stdev(values), 3))
print("median", statistics.median(values))
