# label: benign
from collections import Counter
text = """The quick brown fox jumps over the lazy dog. The dog sleeps."""
counts = Counter(w.strip(".,").lower() for w in text.split())
for word, n in counts.most_common(3):
    print(word, n)
