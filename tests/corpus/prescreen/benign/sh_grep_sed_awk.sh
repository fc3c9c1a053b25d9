# label: benign
printf 'alice 30\nbob 25\ncarol 35\n' > /tmp/people.txt
grep -v '^#' /tmp/people.txt | awk '{ sum += $2 } END { print "total", sum }'
sed -n 's/^\([a-z]*\) .*/\1/p' /tmp/people.txt
