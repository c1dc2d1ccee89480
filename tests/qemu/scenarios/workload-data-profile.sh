# Guest scenario: the data profile of real programs no one here wrote: busybox httpd serving
# wget over loopback TCP, busybox nc over loopback, and a fork/exec/pipe loop, sampled at
# 10 kHz per CPU. Checked on the host by workload-data-profile.check.
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
killall httpd
rmmod dprof
