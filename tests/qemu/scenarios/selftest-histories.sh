# Guest scenario: object access histories of dprof_selftest_obj, whose path is known: allocated
# and written (field `a`, offset 8) by the producer on CPU 0, read (`a`, then `b` at offset 16)
# by the consumer on CPU 1, then freed there. The debug registers watch `a` and `b` as a pair.
# Checked on the host by selftest-histories.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
# A history plan naming a cache that does not exist is refused with a clear error, no file.
if "$DPROF" collect -o /tmp/bad.dprof --histories no_such_cache:0+8 --duration 1s 2> /tmp/bad.err; then
  echo "FAIL: a plan for a missing cache was accepted"; exit 1
fi
grep -q "does not exist" /tmp/bad.err || { echo "FAIL: unclear error:"; cat /tmp/bad.err; exit 1; }
[ ! -e /tmp/bad.dprof ] && [ ! -e /tmp/bad.dprof.partial ] || { echo "FAIL: a file was left"; exit 1; }
cp /tmp/bad.err "$OUT/bad-plan.err"
"$DPROF" collect -o /tmp/histories.dprof --events slab,samples --period 200us --ring-size 32M \
  --histories dprof_selftest_obj:8+8:16+8 --history-rate 200 -- \
  sh -c "echo 'handoff 3000' > $run"
cp /tmp/histories.dprof "$OUT/"
# The type without ranges: dprof samples for --plan-time, then watches the offsets the samples
# show in use. The workload outlasts planning by several seconds even when a loaded host slows
# the guest's planning pause (measured up to 2.5 s), so histories still start while it runs.
"$DPROF" collect -o /tmp/planned.dprof --period 200us --ring-size 32M \
  --histories dprof_selftest_obj --plan-time 1500ms -- \
  sh -c "echo 'handoff 8000' > $run"
cp /tmp/planned.dprof "$OUT/"
# The whole object: dprof_selftest_relay's eight 8-byte chunks, watched four at a time by six
# targets that together put every pair of chunks in one history, and the relay workload's
# objects take one known path (kmod/selftest/relay.rs).
"$DPROF" collect -o /tmp/full.dprof --events slab --histories full:dprof_selftest_relay \
  --history-rate 500 -- sh -c "echo 'relay 5000' > $run"
cp /tmp/full.dprof "$OUT/"
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
