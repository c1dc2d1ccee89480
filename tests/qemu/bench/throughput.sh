# Guest benchmark: how many records per second the collector takes without loss. A load
# generator opens and closes /dev/null as fast as it can (4 slab records an iteration) on 1
# and 2 threads; it runs alone first (the baseline), then under `dprof collect` with two ring
# sizes. Prints one line per run, with the collector's own CPU time per record (what it could
# take on one CPU is one over that); results.txt in $OUT.
set -eu
insmod "$DPROF_KO"
seconds=${1:-5}
{
  echo "baseline (no collector):"
  for threads in 1 2; do dprof-slab-load "$seconds" "$threads"; done
  for ring in 1M 8M; do
    for threads in 1 2; do
      "$DPROF" collect -o /tmp/bench.dprof --ring-size "$ring" -- dprof-slab-load "$seconds" "$threads" 2>/tmp/collect.txt
      cpu=$(sed -n 's/.*collector CPU .* (\([0-9.]*\) µs per record).*/\1/p' /tmp/collect.txt)
      "$DPROF" dump --summary /tmp/bench.dprof > /tmp/bench.txt
      records=$(awk '/^records:/ { print $2 }' /tmp/bench.txt)
      bytes=$(awk '/^records:/ { gsub(/\(/, "", $3); print $3 }' /tmp/bench.txt)
      lost=$(awk '/^lost:/ { print $2 }' /tmp/bench.txt)
      span=$(awk '/^time_span:/ { print $2 }' /tmp/bench.txt)
      echo "collect ring=$ring threads=$threads: $records records, $lost lost, $bytes bytes in ${span}s" \
        "= $(awk -v r="$records" -v s="$span" 'BEGIN { printf "%.0f", r / s }') records/s," \
        "$(awk -v b="$bytes" -v r="$records" 'BEGIN { printf "%.1f", b / r }') bytes/record," \
        "collector CPU ${cpu:-?} us/record"
    done
  done
} 2>&1 | tee "$OUT/results.txt"
rmmod dprof
