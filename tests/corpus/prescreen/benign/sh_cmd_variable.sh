# label: benign
PYTHON="${PYTHON:-python3}"
$PYTHON --version
CC="${CC:-gcc}"
"$CC" --version | head -1
runner="echo"
$runner "done"
