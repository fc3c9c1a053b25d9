# label: benign
fruits=(apple banana cherry)
echo "count: ${#fruits[@]}"
for f in "${fruits[@]}"; do echo "${f^^}"; done
