# label: benign
printf 'a=1\nb=2\nc=3\n' | while IFS='=' read -r key value; do
  echo "key=$key value=$value"
done
