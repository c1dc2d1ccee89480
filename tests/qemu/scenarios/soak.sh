# Guest scenario: a long collection at the highest rate dprof.ko allows (slab events and the
# shortest sampling period), with the smallest rings, so that they overflow on purpose, while
# real programs churn the slab allocator on every CPU (fork/exec, pipes, files, loopback TCP).
# Checked on the host by soak.check: the profile is complete, every lost record is counted
# exactly (per CPU, the Lost records sum to the module's drop counter, and the other records
# to its written counter), and the module freed its rings once the collector closed.
#
#   tests/qemu/run soak [SECONDS]     (default 60; scripts/test --soak runs 600)
# qemu-timeout: 420
set -eu
seconds=${1:-60}
insmod "$DPROF_KO"

mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=16 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/churn.sh <<'WORKLOAD'
# Until /tmp/stop exists: processes, pipes, files and sockets, each a burst of slab work.
i=0
while [ ! -e /tmp/stop ]; do
  echo "pipe $i" | cat | wc -c > /dev/null
  mkdir -p "/tmp/churn.$$"
  echo "$i" > "/tmp/churn.$$/f.$((i % 64))"
  ls "/tmp/churn.$$" > /dev/null
  wget -q -O /dev/null http://127.0.0.1:8080/blob
  i=$((i + 1))
done
rm -rf "/tmp/churn.$$"
WORKLOAD
# One churn loop per CPU, started before the collection and stopped after it.
for _ in $(seq "$(nproc)"); do sh /tmp/churn.sh & done

echo "$seconds" > "$OUT/seconds"
# dprof.ko's vmalloc'ed memory (its rings) while the collection runs, and after it.
(sleep 5; grep '\[dprof\]' /proc/vmallocinfo > "$OUT/vmalloc.during" || true) &
"$DPROF" collect -o "$OUT/soak.dprof" --events slab,samples --period 10us --ring-size 64K \
  --duration "${seconds}s" 2> "$OUT/collect.stderr" || { cat "$OUT/collect.stderr"; exit 1; }
cat "$OUT/collect.stderr"
touch /tmp/stop
wait
# The session is closed: none of dprof.ko's rings may still be allocated.
grep '\[dprof\]' /proc/vmallocinfo > "$OUT/vmalloc.after" || true
"$DPROF" dump --summary "$OUT/soak.dprof" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
killall httpd
rmmod dprof
