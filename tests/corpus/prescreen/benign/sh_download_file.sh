# label: benign
curl -fsSL -o /tmp/data.json https://api.github.com/repos/torvalds/linux
python3 -c 'import json; print(json.load(open("/tmp/data.json"))["full_name"])'
