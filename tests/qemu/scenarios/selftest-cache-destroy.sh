# Guest scenario: caches created and destroyed while dprof.ko traces their objects. The
# selftest's `ephemeral` workload creates dprof_selftest_eph_a and _b in turn, each usually in
# the kmem_cache the last one freed, and counts their objects exactly
# (kmod/selftest/ephemeral.rs). A second run plans histories of eph_a, which is destroyed while
# the plan runs. Checked on the host by selftest-cache-destroy.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
"$DPROF" collect -o /tmp/ephemeral.dprof --events slab --ring-size 16M -- \
  sh -c "echo 'ephemeral 2000' > $run"
cat /sys/kernel/debug/dprof_selftest/ephemeral_objects > "$OUT/ephemeral_objects"
cp /tmp/ephemeral.dprof "$OUT/"
# Histories of a cache that is destroyed while its plan runs: eph_a exists when the plan is
# set, then the rounds destroy it and create others, usually at its address.
echo 'ephemeral-hold 1' > $run
"$DPROF" collect -o /tmp/ephemeral-histories.dprof --events slab --ring-size 16M \
  --histories dprof_selftest_eph_a:0+8 --history-rate 1000 -- \
  sh -c "echo 'ephemeral 1000' > $run"
cp /tmp/ephemeral-histories.dprof "$OUT/"
rmmod dprof_selftest
rmmod dprof
