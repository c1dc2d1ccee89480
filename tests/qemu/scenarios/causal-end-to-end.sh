# Guest scenario: `dprof causal --end-to-end 100` on the causal workload of dprof_selftest.ko
# run for a fixed number of rounds (`causal-rounds 600 120 700`), so that a run's time is its
# critical path: the chain's X accesses and computation, 600 times. The first run is the
# profiling phase; each of the 100 after it must be one experiment, half of them at 0%,
# visited once (its end), and every round of every run must have been done. The view must say
# that experiments are runs, and X (on the critical path) must rank above Y (off it).
# Whole runs under TCG vary by a fifth (0% runs of 0.35 to 0.81 s in one boot on a 2-core
# host), so every sped-up run is at 100% (--fixed-speedup): the slope is then the mean program
# speedup there, about 4 times as precise as a line through random speedups from as many runs
# (measured: 15 runs per type at random speedups put X at +0.12 [-0.03, +0.27]). And the
# rounds are shaped for it: X 120 calls per step (the default 50 made X a fifth of the chain's
# round, and its slope +0.10 to +0.18 with intervals +-0.1 wide: Y's noise ranked it above X
# in one boot of four), Y 700 calls (half the default, so that the worker still has slack for
# the delays X's experiments make it serve, and Y's own experiments insert less). Measured
# with 80 runs: X +0.34 [+0.19, +0.49] and +0.36 [+0.20, +0.52], Y +0.04 and -0.12; 100 runs
# narrow both.
# qemu-timeout: 500
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
st=/sys/kernel/debug/dprof_selftest
run=$st/run
fail() { echo "FAIL: $*"; exit 1; }
runs=100 rounds=600 shape="120 700"
# The selftest takes both counts or neither, each 1 to 10000.
for bad in "causal-rounds 10 120" "causal-rounds 10 0 700" "causal-rounds 10 120 10001"; do
  if echo "$bad" > "$run" 2> /dev/null; then fail "the selftest took '$bad'"; fi
done
r0=$(cat "$st/causal_rounds")
"$DPROF" causal -o /tmp/e2e.dprof --types dprof_selftest_causal_x,dprof_selftest_causal_y \
  --end-to-end "$runs" --fixed-speedup 100 --period 1ms --seed 6 -- sh -c "echo 'causal-rounds $rounds $shape' > $run" \
  2> /tmp/e2e.err || { cat /tmp/e2e.err; fail "dprof causal --end-to-end failed"; }
cat /tmp/e2e.err
r1=$(cat "$st/causal_rounds")
[ $((r1 - r0)) = $(((runs + 1) * rounds)) ] ||
  fail "the workload did $((r1 - r0)) rounds, want $(((runs + 1) * rounds)) ($((runs + 1)) runs)"
grep -q "experiments ([0-9]* at 0%) on 2 types, one per run of the command" /tmp/e2e.err ||
  fail "the summary does not say that each experiment was a run"
# The speedup of every experiment the module started (start records).
"$DPROF" dump /tmp/e2e.dprof |
  sed -n 's/.* experiment=[0-9]* type_index=[0-9]* speedup=\([0-9]*\)% global_delay_ns=.*/\1/p' \
  > /tmp/speedups
started=$(wc -l < /tmp/speedups)
zero=$(grep -c '^0$' /tmp/speedups || true)
echo "experiments started: $started, $zero at 0%"
[ "$started" = "$runs" ] || fail "$started experiments started for $runs runs"
[ "$zero" = $((runs / 2)) ] || fail "$zero of $runs experiments at 0%, want half"
"$DPROF" report --view causal /tmp/e2e.dprof > /tmp/e2e.txt 2>&1 ||
  { cat /tmp/e2e.txt; fail "the causal view failed"; }
cat /tmp/e2e.txt
grep -q "end-to-end (--end-to-end $runs): each experiment is one whole run of the command" \
  /tmp/e2e.txt || fail "the view does not say that experiments are runs"
"$DPROF" report --view causal --json /tmp/e2e.dprof > "$OUT/e2e.json"
cp /tmp/e2e.txt /tmp/e2e.err "$OUT/"
# A command that fails its profiling run: refused in one sentence, and no profile left.
if "$DPROF" causal -o /tmp/bad.dprof --types dprof_selftest_causal_x --end-to-end 3 -- false \
  2> /tmp/bad.err; then
  fail "a failing command was accepted"
fi
cat /tmp/bad.err
grep -q "the command's profiling run failed (command exited with status 1)" /tmp/bad.err ||
  fail "unclear error for a failing command"
if ls /tmp/bad.dprof* > /dev/null 2>&1; then fail "the failed session left a profile"; fi
dmesg | grep "dprof_selftest: causal:" | tail -n 1 > "$OUT/e2e.summary"
echo "causal end-to-end: guest checks passed"
