# label: benign; set: heldout2
run() {
  echo "+ $*"
  "$@"
}
run ls -la
run git --version || true
for tool in git curl; do command -v "$tool" || echo "no $tool"; done
