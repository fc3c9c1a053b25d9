# label: benign
seq 1 5 | xargs -I{} echo "job {}"
ls /workspace | xargs -r wc -c 2>/dev/null | tail -1
