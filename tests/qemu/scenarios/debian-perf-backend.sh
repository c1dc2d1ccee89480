# Guest scenario on Debian 12's own kernel (Linux 6.1 as packaged, slab merging on, no
# slab_nomerge), which no module of ours can load into: `dprof collect` must take the perf
# backend by itself and profile a real workload (busybox httpd serving wget over loopback TCP,
# and a file tree created, listed and removed). Checked on the host by
# debian-perf-backend.check.
# qemu-kernel: debian
# qemu-timeout: 600
set -eu
if [ -e /dev/dprof ]; then
  echo "/dev/dprof exists on a kernel that cannot load dprof.ko"
  exit 1
fi
uname -r > "$OUT/uname"
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=64 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/workload.sh <<'WORKLOAD'
i=0
while [ $i -lt 20 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
d=/tmp/walk
for j in 1 2 3 4 5 6 7 8 9 10; do
  mkdir -p $d/$j
  k=0
  while [ $k -lt 50 ]; do : > $d/$j/f$k; k=$((k + 1)); done
done
ls -lR $d > /dev/null
rm -rf $d
WORKLOAD
# No --backend: with no /dev/dprof, auto must choose perf events and say so.
if ! "$DPROF" collect -o /tmp/debian.dprof --period 100us -- sh /tmp/workload.sh 2> /tmp/collect.err; then
  cat /tmp/collect.err
  exit 1
fi
cat /tmp/collect.err
cp /tmp/debian.dprof /tmp/collect.err "$OUT/"
killall httpd
