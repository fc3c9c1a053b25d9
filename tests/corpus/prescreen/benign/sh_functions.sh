# label: benign
greet() {
  local name="$1"
  echo "Hello, ${name}!"
}
for n in alice bob carol; do greet "$n"; done
