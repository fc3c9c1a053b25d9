# label: benign
def matmul(a, b):
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]

print(matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]))
