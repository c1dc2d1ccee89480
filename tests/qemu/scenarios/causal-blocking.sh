# Guest scenario: per-task delay accounting against per-CPU, on the selftest's
# `causal-blocking` workload (kmod/selftest/causal_blocking.rs): a spinner on CPU 0 accesses X
# for half its time and never waits; a sleeper on CPU 1 sleeps on a timer, accesses Y and
# visits the progress point once per round. X is off the path (slope 0), Y on it. Each mode
# runs the same experiments, every sped-up one at 100%: per task, the sleeper serves on
# waking the delays inserted while it slept, and X stays near 0; per CPU, the idle CPU 1 is
# credited with them, and X gets a slope it does not have. Then, per task, `causal-wakeup`,
# where a producer running X wakes the consumer that makes progress: X is on the path, and
# the consumer is credited on each wake-up with the delays the producer served. The host check
# (dprof-qemu-check causal-blocking) compares the two.
# qemu-timeout: 400
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
fail() { echo "FAIL: $*"; exit 1; }
for mode in task cpu; do
  "$DPROF" causal -o "/tmp/$mode.dprof" --types dprof_selftest_causal_x,dprof_selftest_causal_y \
    --progress kprobe:dprof_selftest_causal_blocking_round --fixed-speedup 100 \
    --delay-accounting "$mode" --plan-time 4s --experiment 200ms --period 1ms --seed 7 \
    -- sh -c "echo 'causal-blocking 25000' > $run" 2> "/tmp/$mode.err" ||
    { cat "/tmp/$mode.err"; fail "dprof causal --delay-accounting $mode failed"; }
  cat "/tmp/$mode.err"
  dmesg | grep "dprof_selftest: causal-blocking:" | tail -n 1 | tee "$OUT/$mode.summary"
  "$DPROF" report --view causal "/tmp/$mode.dprof" > "/tmp/$mode.txt" 2>&1 ||
    { cat "/tmp/$mode.txt"; fail "the causal view of the $mode session failed"; }
  cat "/tmp/$mode.txt"
  cp "/tmp/$mode.txt" "$OUT/"
  "$DPROF" report --view causal --json "/tmp/$mode.dprof" > "$OUT/$mode.json"
done
# The credit rule: the consumer of `causal-wakeup` is woken by the producer, which runs X.
"$DPROF" causal -o /tmp/wakeup.dprof --types dprof_selftest_causal_x,dprof_selftest_causal_y \
  --progress kprobe:dprof_selftest_causal_wakeup_round --fixed-speedup 100 \
  --plan-time 4s --experiment 200ms --period 1ms --seed 9 \
  -- sh -c "echo 'causal-wakeup 20000' > $run" 2> /tmp/wakeup.err ||
  { cat /tmp/wakeup.err; fail "dprof causal on causal-wakeup failed"; }
cat /tmp/wakeup.err
dmesg | grep "dprof_selftest: causal-wakeup:" | tail -n 1 | tee "$OUT/wakeup.summary"
"$DPROF" report --view causal /tmp/wakeup.dprof | tee "$OUT/wakeup.txt"
"$DPROF" report --view causal --json /tmp/wakeup.dprof > "$OUT/wakeup.json"
grep -q "^delays: per task (Coz's rules for threads)" /tmp/task.txt ||
  fail "the per-task view does not say how delays were kept"
grep -q "^delays: per CPU (--delay-accounting cpu)" /tmp/cpu.txt ||
  fail "the per-CPU view does not say how delays were kept"
grep -q '"delay_accounting": *"task"' "$OUT/task.json" || fail "the JSON does not say per task"
grep -q '"delay_accounting": *"cpu"' "$OUT/cpu.json" || fail "the JSON does not say per CPU"
echo "causal blocking: guest checks passed"
