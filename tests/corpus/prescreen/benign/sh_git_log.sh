# label: benign
git log --oneline -n 5 2>/dev/null || echo "not a git repo"
git status --short 2>/dev/null | head
