# label: benign
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo hello > "$WORK/a.txt"
cat "$WORK/a.txt"
