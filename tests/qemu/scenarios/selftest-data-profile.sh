# Guest scenario: profile dprof_selftest.ko, whose answers are known. A producer on CPU 0
# writes field `a` of dprof_selftest_obj objects and hands them to a consumer on CPU 1 that
# reads `a` and `b` (the type bounces); then dprof_selftest_local objects are touched on CPU 0
# only (no bounce). Checked on the host by selftest-data-profile.check.
set -eu
# Profiles are written to /tmp and copied out afterwards: writing them over 9p while
# collecting would put the 9p client's own traffic into the profile.
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
[ -e "$run" ] || { echo "FAIL: $run missing"; exit 1; }
# A bad command is refused, not run.
if echo "nonsense 10" > "$run" 2>/dev/null; then echo "FAIL: a bad selftest command was accepted"; exit 1; fi
# The bounce rests on objects sampled on both CPUs: about (producer samples x consumer
# samples / objects) of them, 2.2 in 3 s of handoff under TCG (one run in nine would see
# none), 7 in 10 s.
"$DPROF" collect -o /tmp/selftest.dprof --events slab,samples --period 100us --ring-size 32M -- \
  sh -c "echo 'handoff 10000' > $run && echo 'local 1500' > $run"
cp /tmp/selftest.dprof "$OUT/"
# A collection that starts and stops while the local workload allocates and frees on CPU 0:
# no free may be missed while the probes are attached (the check compares the counts).
echo 'local 10000' > "$run" &
load=$!
sleep 1
"$DPROF" collect -o /tmp/start.dprof --events slab --ring-size 8M -- sleep 2
wait "$load"
cp /tmp/start.dprof "$OUT/"
# The module's DWARF, for field names on the host.
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
