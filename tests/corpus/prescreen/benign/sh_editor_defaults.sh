# label: benign; set: heldout
"${EDITOR:-true}" notes.txt
${PAGER:-cat} /etc/hostname
dir=$(dirname "$0")
"$dir/helper.sh" --help || true
