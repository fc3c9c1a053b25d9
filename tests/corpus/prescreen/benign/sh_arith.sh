# label: benign
total=0
for i in $(seq 1 10); do
  total=$((total + i * i))
done
echo "sum of squares: $total"
