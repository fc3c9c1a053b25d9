# label: benign
for ext in txt csv json md; do
  case "$ext" in
    txt|md) echo "$ext: text" ;;
    csv) echo "$ext: table" ;;
    *) echo "$ext: other" ;;
  esac
done
