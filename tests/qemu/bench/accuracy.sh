# Guest benchmark: the workload of workload-data-profile.sh (busybox httpd serving wget over
# loopback TCP, busybox nc over loopback, a fork/exec/pipe loop) recorded twice, each in its
# own run: by perf (cpu-clock, kernel only, every 100 us per CPU) and by dprof (samples and
# slab events at the same period). perf.data and workload.dprof in $OUT; the host types and
# compares them (scripts/bench-accuracy). Needs perf in the initramfs (--initramfs-extra).
# qemu-timeout: 900
set -eu
command -v perf > /dev/null || { echo "accuracy: no perf in the guest (tests/qemu/run --initramfs-extra)"; exit 1; }
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=256 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
# The workload of workload-data-profile.sh, word for word (dprof-accuracy's tests check it).
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
# Both write to /tmp and copy out afterwards: writing over 9p while recording would put the
# 9p client's own traffic into the profile.
perf record -e cpu-clock:k -c 100000 -a --no-buildid-cache -o /tmp/perf.data -- sh /tmp/workload.sh
cp /tmp/perf.data "$OUT/"
insmod "$DPROF_KO"
"$DPROF" collect -o /tmp/workload.dprof --events slab,samples --period 100us -- sh /tmp/workload.sh
cp /tmp/workload.dprof "$OUT/"
rmmod dprof
killall httpd
