# label: benign; set: heldout
handle_start() { echo "starting"; }
handle_stop() { echo "stopping"; }
action=$(echo "${1:-START}" | tr '[:upper:]' '[:lower:]')
"handle_$action"
tool=$(command -v rg || command -v grep)
"$tool" --version | head -1
