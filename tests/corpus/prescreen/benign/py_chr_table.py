# label: benign
for code in range(65, 75):
    print(code, chr(code), hex(code))
letters = "".join(chr(c) for c in range(97, 123))
print(letters)
