# Guest scenario: caches created and destroyed while dprof.ko traces their objects. The
# selftest's `ephemeral` workload creates dprof_selftest_eph_a and _b in turn, each usually in
# the kmem_cache the last one freed, and counts their objects exactly
# (kmod/selftest/ephemeral.rs). Checked on the host by selftest-cache-destroy.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
"$DPROF" collect -o /tmp/ephemeral.dprof --events slab --ring-size 16M -- \
  sh -c "echo 'ephemeral 2000' > $run"
cat /sys/kernel/debug/dprof_selftest/ephemeral_objects > "$OUT/ephemeral_objects"
cp /tmp/ephemeral.dprof "$OUT/"
rmmod dprof_selftest
rmmod dprof
