# label: benign
echo "stressed" | rev
echo "Hello World" | tr 'a-z' 'A-Z'
echo "hello" | tr -d 'l'
