# label: benign
for f in /workspace/*.csv; do
  echo "$f: $(wc -l < "$f") lines"
done
