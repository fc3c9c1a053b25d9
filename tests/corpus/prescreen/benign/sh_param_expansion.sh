# label: benign
name="report.txt"
echo "${name%.txt}.csv"
echo "${name^^}"
echo "${name:0:6}"
base="${name//./_}"
echo "$base"
for v in HOME SHELL; do
  echo "$v=${!v}"
done
