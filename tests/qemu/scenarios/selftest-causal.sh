# Guest scenario: the causal workload of dprof_selftest.ko (kmod/selftest/causal.rs). A chain
# on CPU 0 accesses dprof_selftest_causal_x (on the critical path) and a worker on CPU 1
# accesses dprof_selftest_causal_y (more samples, off the critical path); the chain calls
# dprof_selftest_causal_round once per round. First the plain data profile, which must rank Y
# above X. Checked on the host by selftest-causal.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
st=/sys/kernel/debug/dprof_selftest
run=$st/run
[ -e "$st/causal_rounds" ] || { echo "FAIL: $st/causal_rounds missing"; exit 1; }
# The progress point is a kprobe target: it must be in kallsyms.
grep -q " dprof_selftest_causal_round\b" /proc/kallsyms ||
  { echo "FAIL: dprof_selftest_causal_round is not in /proc/kallsyms"; exit 1; }
before=$(cat "$st/causal_rounds")
[ "$before" = 0 ] || { echo "FAIL: causal_rounds reads '$before' after load, want 0"; exit 1; }
# Profiles are written to /tmp and copied out afterwards (9p traffic would enter them).
"$DPROF" collect -o /tmp/causal-data.dprof --events slab,samples --period 100us --ring-size 32M -- \
  sh -c "echo 'causal 4000' > $run"
cat "$st/causal_rounds" > "$OUT/causal-data.rounds"
# The workload's own summary: rounds, time per round, time per phase.
dmesg | grep "dprof_selftest: causal:" | tail -n 1 | tee "$OUT/causal-data.summary"
cp /tmp/causal-data.dprof "$OUT/"
rm /tmp/causal-data.dprof
# The module's DWARF, for field names on the host.
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
