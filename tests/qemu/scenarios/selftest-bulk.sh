# Guest scenario: slab objects allocated and freed in bulk (kmem_cache_alloc_bulk,
# kmem_cache_free_bulk, kfree_bulk), which fire no kmem tracepoint: the module probes those
# functions. The selftest's `bulk` workload counts its objects exactly (kmod/selftest/bulk.rs).
# Checked on the host by selftest-bulk.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
"$DPROF" collect -o /tmp/bulk.dprof --events slab,samples --period 200us --ring-size 32M -- \
  sh -c "echo 'bulk 3000' > $run"
cat /sys/kernel/debug/dprof_selftest/bulk_objects > "$OUT/bulk_objects"
cp /tmp/bulk.dprof "$OUT/"
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
