# label: benign
printf 'id,name,score\n1,ann,90\n2,bo,85\n' > /tmp/s.csv
cut -d, -f2,3 /tmp/s.csv | tail -n +2 | sort -t, -k2 -n
