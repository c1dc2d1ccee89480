# Guest scenario behind scripts/demo: collect slab events and access samples (10 kHz per CPU)
# while busybox httpd serves wget over loopback TCP and a fork/exec/pipe loop runs; scripts/demo
# then prints the data profile.
set -eu
# Profiles are written to /tmp and copied out afterwards: writing them over 9p while
# collecting would put the 9p client's own traffic into the profile.
insmod "$DPROF_KO"
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=64 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/workload.sh <<'WORKLOAD'
i=0
while [ $i -lt 20 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
i=0
while [ $i -lt 100 ]; do echo "pipe $i" | cat | wc -c > /dev/null; i=$((i + 1)); done
WORKLOAD
"$DPROF" collect -o /tmp/demo.dprof --period 100us -- sh /tmp/workload.sh
cp /tmp/demo.dprof "$OUT/"
"$DPROF" dump --summary "$OUT/demo.dprof" > "$OUT/summary.txt"
grep -q skbuff_head_cache "$OUT/summary.txt"
killall httpd
rmmod dprof
