# label: benign
cat > /workspace/run.sh <<'EOF'
#!/bin/sh
echo running
EOF
chmod +x /workspace/run.sh
chmod 644 /workspace/notes.txt 2>/dev/null || true
/workspace/run.sh
