# label: benign
while getopts "v" opt; do
  case $opt in v) VERBOSE=1 ;; esac
done
echo "verbose=${VERBOSE:-0}"
