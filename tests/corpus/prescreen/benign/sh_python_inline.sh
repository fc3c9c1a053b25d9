# label: benign
python3 - <<'EOF'
import statistics
print(statistics.mean([1, 2, 3, 4]))
EOF
