# label: benign
echo "HOME=$HOME"
echo "PATH=$PATH"
uname -a
id -u
