# Guest scenario: collect slab events while real programs run (busybox httpd serving wget over
# loopback TCP, and a fork/exec/pipe loop), with the SLUB statistics and /proc/slabinfo
# snapshotted around the workload for tests/qemu/scenarios/slab-workload.check.
set -eu
insmod "$DPROF_KO"

mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=64 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www

cat > /tmp/workload.sh <<'WORKLOAD'
# Snapshots use shell builtins only (read, printf, redirections): a fork here would itself
# allocate task_structs and skew the numbers being compared.
snapshot() {
  read -r up _ < /proc/uptime
  echo "$up" > "$OUT/uptime.$1.begin"
  for dir in /sys/kernel/slab/*; do
    [ -d "$dir" ] && [ ! -L "$dir" ] || continue
    read -r af _ < "$dir/alloc_fastpath"; read -r as _ < "$dir/alloc_slowpath"
    read -r ff _ < "$dir/free_fastpath"; read -r fs _ < "$dir/free_slowpath"
    read -r cp _ < "$dir/cpu_partial"
    printf '%s %s %s %s %s %s\n' "${dir##*/}" "$af" "$as" "$ff" "$fs" "$cp"
  done > "$OUT/slubstats.$1"
  while read -r line; do echo "$line"; done < /proc/slabinfo > "$OUT/slabinfo.$1"
  # KFENCE (debug kernels, some distributions) serves a sampled allocation from its own pool:
  # the slab tracepoints fire, SLUB's counters and slabinfo never see it.
  if [ -r /sys/kernel/debug/kfence/stats ]; then
    while read -r line; do echo "$line"; done < /sys/kernel/debug/kfence/stats > "$OUT/kfence.$1"
  fi
  read -r up _ < /proc/uptime
  echo "$up" > "$OUT/uptime.$1.end"
}
snapshot before
i=0
while [ $i -lt 20 ]; do
  wget -q -O /dev/null http://127.0.0.1:8080/blob
  i=$((i + 1))
done
i=0
while [ $i -lt 100 ]; do
  echo "pipe $i" | cat | wc -c > /dev/null
  i=$((i + 1))
done
snapshot after
WORKLOAD

"$DPROF" collect -o "$OUT/slab.dprof" --ring-size 8M -- sh /tmp/workload.sh
"$DPROF" dump --summary "$OUT/slab.dprof" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
"$DPROF" dump --json "$OUT/slab.dprof" > /dev/null
killall httpd
rmmod dprof
