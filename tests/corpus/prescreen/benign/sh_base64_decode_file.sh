# label: benign
DATA="aGVsbG8gd29ybGQK"
echo "$DATA" | base64 -d > greeting.txt
cat greeting.txt
base64 greeting.txt > greeting.b64
base64 -d greeting.b64 | wc -c
