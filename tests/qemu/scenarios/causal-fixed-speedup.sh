# Guest scenario: `dprof causal --fixed-speedup 40` on the causal workload of
# dprof_selftest.ko. Every sped-up experiment must run at 40%, each next to a 0% one (so the
# two speedups alternate, as many of each within one), the profile must say so, and the view
# must say how its slopes were found. The mechanics only: selftest-causal checks rankings.
# qemu-timeout: 300
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
fail() { echo "FAIL: $*"; exit 1; }
"$DPROF" causal -o /tmp/fixed.dprof --types dprof_selftest_causal_x,dprof_selftest_causal_y \
  --progress kprobe:dprof_selftest_causal_round --fixed-speedup 40 --plan-time 2s \
  --experiment 200ms --period 1ms --seed 5 -- sh -c "echo 'causal 15000' > $run" \
  2> /tmp/fixed.err || { cat /tmp/fixed.err; fail "dprof causal --fixed-speedup failed"; }
cat /tmp/fixed.err
# The speedup of every experiment the module started (start records: global_delay_ns).
"$DPROF" dump /tmp/fixed.dprof |
  sed -n 's/.* experiment=[0-9]* type_index=[0-9]* speedup=\([0-9]*\)% global_delay_ns=.*/\1/p' \
  > /tmp/speedups
zero=$(grep -c '^0$' /tmp/speedups || true)
forty=$(grep -c '^40$' /tmp/speedups || true)
other=$(grep -vc -e '^0$' -e '^40$' /tmp/speedups || true)
echo "experiments: $zero at 0%, $forty at 40%, $other at another speedup"
[ "$other" = 0 ] || fail "$other experiments ran at a speedup other than 0% and 40%"
[ "$forty" -ge 10 ] || fail "only $forty experiments at 40% in 15 s of workload"
diff=$((zero - forty))
[ "$diff" -ge -1 ] && [ "$diff" -le 1 ] || fail "$zero at 0% against $forty at 40%: not paired"
"$DPROF" report --view causal /tmp/fixed.dprof > /tmp/fixed.txt 2>&1 ||
  { cat /tmp/fixed.txt; fail "the causal view failed"; }
cat /tmp/fixed.txt
grep -q "every sped-up experiment at 40% (--fixed-speedup)" /tmp/fixed.txt ||
  fail "the view does not say the speedup was fixed"
"$DPROF" report --view causal --json /tmp/fixed.dprof > /tmp/fixed.json
grep -q '"fixed_speedup_percent": *40' /tmp/fixed.json ||
  fail "the JSON does not give fixed_speedup_percent 40"
cp /tmp/fixed.txt "$OUT/"
echo "causal fixed speedup: all checks passed"
