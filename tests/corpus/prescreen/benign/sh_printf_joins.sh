# label: benign; set: heldout2
a=2026
b=11
out=$(printf '%s-%s' "$a" "$b")
echo "$out"
set -- "$@" --verbose
echo "$#"
