# label: benign
dd if=/dev/zero of=/tmp/test.img bs=1M count=8 status=none
ls -lh /tmp/test.img
rm -f /tmp/test.img
