# Guest scenario: the causal workload of dprof_selftest.ko (kmod/selftest/causal.rs). A chain
# on CPU 0 accesses dprof_selftest_causal_x (on the critical path) and a worker on CPU 1
# accesses dprof_selftest_causal_y (more samples, off the critical path); the chain calls
# dprof_selftest_causal_round once per round. First the workload alone (its uninstrumented
# rate), then the plain data profile, which must rank Y above X; then `dprof causal`: a count
# run (kprobe and user progress points against the workload's own counter), the ranking run
# (X above Y), a run on functions (--units functions), one whose scope leaves the functions'
# helpers out (counted for their callers), a run with a sampled progress point
# (the chain's computation), and the bad inputs. Checked on the host
# by selftest-causal.check.
# qemu-timeout: 1200
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
# Uptime in ns (centiseconds: /proc/uptime), on the clock of the records' timestamps.
uptime_ns() { awk '{ printf "%.0f\n", $1 * 1e9 }' /proc/uptime; }
# The uninstrumented rate: rounds in 10 s without the profiler.
t0=$(uptime_ns); r0=$(cat "$st/causal_rounds")
echo 'causal 10000' > $run
t1=$(uptime_ns); r1=$(cat "$st/causal_rounds")
echo "$((r1 - r0)) $((t1 - t0))" > "$OUT/uninstrumented.rounds"
# Profiles are written to /tmp and copied out afterwards (9p traffic would enter them).
# A sample every 1 ms, as in the causal runs: at 100 us the guest's timer interrupts fired late
# by amounts that differed between its two CPUs, so the samples stopped following the time
# each CPU spent (Y / X samples 1.24 to 1.46 in CI runs where the workload's own times said
# about 2.5; at 1 ms, in the same runs, the functions run's profiling phase gave the Y
# accesses 0.76 of the computation's samples where the workload's times gave 0.75).
"$DPROF" collect -o /tmp/causal-data.dprof --events slab,samples --period 1ms --ring-size 32M -- \
  sh -c "echo 'causal 6000' > $run"
cat "$st/causal_rounds" > "$OUT/causal-data.rounds"
# The workload's own summary: rounds, time per round, time per phase.
dmesg | grep "dprof_selftest: causal:" | tail -n 1 | tee "$OUT/causal-data.summary"
cp /tmp/causal-data.dprof "$OUT/"
rm /tmp/causal-data.dprof

# Count run: the profiling phase (2 s) sees a 1 s workload; the experiments start during the
# pause after it, so that every round of the second workload, and only those, happens while
# the experiments' kprobe counts; then 50 user signals, from separate processes and from one.
cat > /tmp/counts.sh <<COUNTS
echo 'causal 1000' > $run
sleep 6
awk '{ printf "%.0f\\n", \$1 * 1e9 }' /proc/uptime > /tmp/counts.t0
cat $st/causal_rounds > /tmp/counts.r0
echo 'causal 3000' > $run
cat $st/causal_rounds > /tmp/counts.r1
i=0
while [ \$i -lt 20 ]; do "$DPROF" progress tick; i=\$((i + 1)); done
"$DPROF" progress tick --count 30
COUNTS
"$DPROF" causal -o /tmp/counts.dprof --types dprof_selftest_causal_x --plan-time 2s \
  --progress kprobe:dprof_selftest_causal_round --progress user:tick --experiment 200ms \
  --period 100us --seed 2 -- sh /tmp/counts.sh 2> /tmp/counts.err || { cat /tmp/counts.err; exit 1; }
cat /tmp/counts.err
echo "$(cat /tmp/counts.r0) $(cat /tmp/counts.r1) $(cat /tmp/counts.t0) 50" > "$OUT/counts.rounds"
cp /tmp/counts.dprof "$OUT/"; rm /tmp/counts.dprof

# The ranking run: X and Y, random speedups, the round as progress point; 4 minutes of
# workload (the selftest takes at most 60 s per command). A sample every 1 ms: under TCG the
# timer interrupt costs the guest far more than on hardware, and at 100 us it fired 2-10x
# late, by amounts that varied between experiments.
t0=$(uptime_ns); r0=$(cat "$st/causal_rounds")
"$DPROF" causal -o /tmp/causal.dprof --types dprof_selftest_causal_x,dprof_selftest_causal_y \
  --progress kprobe:dprof_selftest_causal_round --plan-time 3s --experiment 200ms \
  --period 1ms --seed 1 -- \
  sh -c "i=0; while [ \$i -lt 8 ]; do echo 'causal 30000' > $run; i=\$((i + 1)); done" \
  2> /tmp/causal.err || { cat /tmp/causal.err; exit 1; }
cat /tmp/causal.err
t1=$(uptime_ns); r1=$(cat "$st/causal_rounds")
echo "$((r1 - r0)) $((t1 - t0))" > "$OUT/causal.rounds"
dmesg | grep "dprof_selftest: causal:" | tail -n 1 | tee "$OUT/causal.summary"
cp /tmp/causal.dprof "$OUT/"; rm /tmp/causal.dprof
# The uninstrumented rate again: the host's load may have changed since the first.
t0=$(uptime_ns); r0=$(cat "$st/causal_rounds")
echo 'causal 10000' > $run
t1=$(uptime_ns); r1=$(cat "$st/causal_rounds")
echo "$((r1 - r0)) $((t1 - t0))" > "$OUT/uninstrumented-after.rounds"

# Functions as the unit: the two most sampled functions named dprof_selftest_causal_* are
# the chain's computation (on the critical path, most of CPU 0's round) and the worker's Y
# accesses (off it); X's access function comes third. Every instruction of each is sped up.
"$DPROF" causal -o /tmp/functions.dprof --units functions --scope 'dprof_selftest_causal_*' \
  --top 2 --progress kprobe:dprof_selftest_causal_round --plan-time 2s --experiment 200ms \
  --period 1ms --seed 3 -- sh -c "echo 'causal 40000' > $run" \
  2> /tmp/functions.err || { cat /tmp/functions.err; exit 1; }
cat /tmp/functions.err
cp /tmp/functions.err "$OUT/functions.err"
cp /tmp/functions.dprof "$OUT/"; rm /tmp/functions.dprof

# Helpers counted for their callers in scope: the scope holds only the chain's and the
# worker's round functions (Rust's, named as kallsyms mangles them), which spend their time
# in the access and computation functions they call, out of scope. The module counts those
# samples for the caller on the call chain, so the chain's round, on the critical path, is
# sped up as a whole, and the worker's is not on it.
chain=$(awk '$3 ~ /causal11chain_round$/ { print $3; exit }' /proc/kallsyms)
worker=$(awk '$3 ~ /causal12worker_round$/ { print $3; exit }' /proc/kallsyms)
[ -n "$chain" ] && [ -n "$worker" ] ||
  { echo "FAIL: the chain's or the worker's round function is not in /proc/kallsyms"; exit 1; }
"$DPROF" causal -o /tmp/callers.dprof --scope "$chain,$worker" --functions "$chain,$worker" \
  --progress kprobe:dprof_selftest_causal_round --plan-time 2s --experiment 200ms \
  --fixed-speedup 25 --period 1ms --seed 5 -- sh -c "echo 'causal 30000' > $run" \
  2> /tmp/callers.err || { cat /tmp/callers.err; exit 1; }
cat /tmp/callers.err
"$DPROF" report --view causal /tmp/callers.dprof
cp /tmp/callers.dprof "$OUT/"; rm /tmp/callers.dprof

# A sampled progress point: the samples in the chain's computation (on the critical path,
# most of CPU 0's round), no probe; the round's kprobe beside it for comparison. 30 s of
# workload: about 70 experiments in all.
"$DPROF" causal -o /tmp/sampled.dprof --types dprof_selftest_causal_x,dprof_selftest_causal_y \
  --progress sampled:dprof_selftest_causal_compute --progress kprobe:dprof_selftest_causal_round \
  --plan-time 2s --experiment 200ms --period 1ms --seed 4 -- sh -c "echo 'causal 30000' > $run" \
  2> /tmp/sampled.err || { cat /tmp/sampled.err; exit 1; }
cat /tmp/sampled.err
cp /tmp/sampled.dprof "$OUT/"; rm /tmp/sampled.dprof

# Zero visits: a user point nobody signals. Every experiment is kept in the file, and the
# analysis must discard each with its reason. Experiments without visits double in length, and
# the profiling phase took from 1.2 to 2.4 s of the guest's time in CI runs: 8 s of workload
# leave room for several after it.
"$DPROF" causal -o /tmp/novisits.dprof --types dprof_selftest_causal_x --plan-time 1s \
  --progress user:never --experiment 100ms --period 100us -- sh -c "echo 'causal 8000' > $run" \
  2> /tmp/novisits.err || { cat /tmp/novisits.err; exit 1; }
cat /tmp/novisits.err
cp /tmp/novisits.dprof "$OUT/"; rm /tmp/novisits.dprof

# Bad input: each refused in one clear line, and no profile left behind.
refused() {
  name=$1 needle=$2; shift 2
  if "$@" > "/tmp/$name.out" 2> "/tmp/$name.err"; then
    echo "FAIL: $name was accepted"; cat "/tmp/$name.err"; exit 1
  fi
  grep -q "$needle" "/tmp/$name.err" || { echo "FAIL: $name: unclear error:"; cat "/tmp/$name.err"; exit 1; }
  if ls /tmp/bad.dprof* > /dev/null 2>&1; then echo "FAIL: $name left a profile"; exit 1; fi
  cp "/tmp/$name.err" "$OUT/refused-$name.txt"
}
refused unknown-kprobe "no kernel function named .no_such_function_xyz." \
  "$DPROF" causal -o /tmp/bad.dprof --progress kprobe:no_such_function_xyz --duration 5s
refused unknown-tracepoint "does not exist in this kernel" \
  "$DPROF" causal -o /tmp/bad.dprof --progress tracepoint:nosys:no_such_event --duration 5s
refused never-sampled "type .no_such_type. was never sampled" \
  "$DPROF" causal -o /tmp/bad.dprof --types no_such_type --progress user:x --plan-time 1s \
  -- sh -c "echo 'causal 2000' > $run"
refused unknown-sampled "no kernel function named .no_such_function_xyz." \
  "$DPROF" causal -o /tmp/bad.dprof --progress sampled:no_such_function_xyz --duration 5s
refused sampled-latency "counts samples, not arrivals" \
  "$DPROF" causal -o /tmp/bad.dprof --latency sampled:dprof_selftest_causal_compute,user:x \
  --duration 5s
refused no-progress-point "give --progress" "$DPROF" causal -o /tmp/bad.dprof --duration 5s
refused unknown-function "no kernel function named .no_such_function_xyz." \
  "$DPROF" causal -o /tmp/bad.dprof --functions no_such_function_xyz --progress user:x --duration 5s
refused empty-scope "matches no kernel function" \
  "$DPROF" causal -o /tmp/bad.dprof --units functions --scope 'no_such_prefix_xyz_*' \
  --progress user:x --duration 5s
refused no-session "no running .dprof causal. session" "$DPROF" progress tick

# The module's DWARF, for field names on the host.
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
