# label: benign
data = [[1, 2, 3], [4, 5, 6]]
transposed = list(map(list, zip(*data)))
flat = [x for row in data for x in row]
print(transposed, sum(flat) / len(flat))
