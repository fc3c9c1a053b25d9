# label: benign
echo '{"items":[{"n":1},{"n":2},{"n":3}]}' | jq '[.items[].n] | add'
