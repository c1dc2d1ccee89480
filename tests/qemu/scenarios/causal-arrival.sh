# Guest scenario: load amplification (--arrival, --arrival-speedup) on the selftest's
# `causal-arrival` workload (kmod/selftest/causal_arrival.rs): a generator on CPU 0 makes a
# request arrive every GAP (the arrival point dprof_selftest_causal_arrive) and does not
# wait; a server on CPU 1 serves each with X then Y accesses and visits the progress point
# dprof_selftest_causal_depart. The server is busy part of the time, so throughput is the
# arrival rate and speeding X up changes nothing. Amplified so that requests come faster
# than the server serves them, the server is the bottleneck, and X's slope is what its share
# of a request predicts. A first run, sampled as the experiments are, measures a request's
# service time S (under TCG it was 450 to 720 us on different hosts) to choose GAP and the
# amplification: the server busy 70% of the time (GAP = S / 0.7), and amplified, requests
# every 0.6 S in effective time. The arrivals' delays are then 58% of the wall time, which
# the server can serve at 1 ms samples (at 80% it fell behind, a pause being at most 5 ms).
# The host check (dprof-qemu-check causal-arrival) compares the two sessions.
# qemu-timeout: 600
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
fail() { echo "FAIL: $*"; exit 1; }
summary() { dmesg | grep "dprof_selftest: causal-arrival:" | tail -n 1; }
field() { echo "$1" | sed -n "s/.*$2 \([0-9]*\) us.*/\1/p"; }
# The selftest refuses a gap outside 100 us to 100 ms, and numbers a workload does not take.
for bad in "causal-arrival 10 50" "causal-arrival 10 200000" "causal-arrival 10 1000 1" "causal 10 1000"; do
  if echo "$bad" > "$run" 2> /dev/null; then fail "the selftest took '$bad'"; fi
done

"$DPROF" collect -o /tmp/calibrate.dprof --period 1ms \
  -- sh -c "echo 'causal-arrival 4000' > $run" 2> /tmp/calibrate.err ||
  { cat /tmp/calibrate.err; fail "the calibration run failed"; }
line=$(summary)
echo "calibration: $line"
x=$(field "$line" "X")
y=$(field "$line" "Y")
[ -n "$x" ] && [ -n "$y" ] || fail "no workload summary: $line"
service=$((x + y))
[ "$service" -gt 0 ] || fail "no service time: $line"
gap=$((service * 10 / 7))
speedup_us=$((gap - service * 6 / 10))
echo "amplification: ${speedup_us} us per arrival (arrivals every ${gap} us, ${service} us per request)"
echo "$speedup_us" > "$OUT/arrival-speedup-us"

for session in plain amplified; do
  extra=""
  [ "$session" = amplified ] && extra="--arrival-speedup ${speedup_us}us"
  # shellcheck disable=SC2086
  "$DPROF" causal -o "/tmp/$session.dprof" --types dprof_selftest_causal_x,dprof_selftest_causal_y \
    --progress kprobe:dprof_selftest_causal_depart --arrival kprobe:dprof_selftest_causal_arrive \
    $extra --fixed-speedup 50 --plan-time 4s --experiment 200ms --period 1ms --seed 5 \
    -- sh -c "echo 'causal-arrival 40000 $gap' > $run" 2> "/tmp/$session.err" ||
    { cat "/tmp/$session.err"; fail "dprof causal ($session) failed"; }
  cat "/tmp/$session.err"
  cp "/tmp/$session.err" "$OUT/$session.err"
  summary | tee "$OUT/$session.summary"
  "$DPROF" report --view causal "/tmp/$session.dprof" | tee "$OUT/$session.txt"
  "$DPROF" report --view causal --json "/tmp/$session.dprof" > "$OUT/$session.json"
done
grep -q "^load: requests arrive at kprobe:dprof_selftest_causal_arrive, not amplified" \
  "$OUT/plain.txt" || fail "the plain session's view does not say its load"
grep -q "^load: amplified " "$OUT/amplified.txt" ||
  fail "the amplified session's view does not say its amplification"
"$DPROF" report --view causal --format coz /tmp/amplified.dprof > /tmp/amplified.coz
grep -q "amplification=" /tmp/amplified.coz || fail "Coz's format lacks the amplification"
echo "causal arrival: guest checks passed"
