# label: benign
cat <<'EOF' | sort | uniq -c | sort -rn
apple
banana
apple
cherry
banana
apple
EOF
