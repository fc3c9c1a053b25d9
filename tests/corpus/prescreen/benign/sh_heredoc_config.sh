# label: benign
cat > /workspace/config.ini <<EOF
[server]
port = 8080
debug = false
EOF
grep port /workspace/config.ini
