# Guest scenario: the data profile of real programs no one here wrote: busybox httpd serving
# wget over loopback TCP, busybox nc over loopback, and a fork/exec/pipe loop, sampled at
# 10 kHz per CPU; then a filesystem workload (busybox's find, cat, ls, tar and cp over a tree
# of 1000 files and a 10 MiB file on the guest's tmpfs). Checked on the host by
# workload-data-profile.check.
set -eu
# Profiles are written to /tmp and copied out afterwards: writing them over 9p while
# collecting would put the 9p client's own traffic into the profile.
insmod "$DPROF_KO"
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=256 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/workload.sh <<'WORKLOAD'
i=0
while [ $i -lt 30 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
nc -l -p 9000 > /dev/null &
listener=$!
sleep 1
dd if=/dev/zero bs=65536 count=200 2>/dev/null | nc 127.0.0.1 9000
wait $listener || true
i=0
while [ $i -lt 200 ]; do echo "pipe $i" | cat | wc -c > /dev/null; i=$((i + 1)); done
WORKLOAD
"$DPROF" collect -o /tmp/workload.dprof --events slab,samples --period 100us -- sh /tmp/workload.sh
cp /tmp/workload.dprof "$OUT/"
cat > /tmp/fs.sh <<'FILESYSTEM'
t=/tmp/tree
i=0
while [ $i -lt 20 ]; do
  mkdir -p $t/$i
  j=0
  while [ $j -lt 50 ]; do echo "file $i $j" > $t/$i/$j; j=$((j + 1)); done
  i=$((i + 1))
done
dd if=/dev/zero of=$t/big bs=65536 count=160 2>/dev/null
for r in 1 2 3; do
  find $t -type f | xargs cat > /dev/null
  ls -lR $t > /dev/null
  tar cf - $t | cat > /dev/null
done
cp -r $t /tmp/copy
rm -rf $t /tmp/copy
FILESYSTEM
"$DPROF" collect -o /tmp/fs.dprof --events slab,samples --period 100us -- sh /tmp/fs.sh
cp /tmp/fs.dprof "$OUT/"
killall httpd
rmmod dprof
