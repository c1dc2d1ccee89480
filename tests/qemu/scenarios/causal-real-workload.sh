# Guest scenario: `dprof causal --end-to-end` over real programs no one here wrote (busybox
# httpd serving wget over loopback TCP), and its overhead split as Coz splits it: startup
# (the profiling run and planning), sampling (the 0% runs against the same command run
# alone) and delays (inserted by the sped-up runs), for both ways of accounting delays. The
# command first runs alone BASELINE times, timed here; then dprof runs it 1 + RUNS times with
# delays per task (the default), and 1 + CPU_RUNS times with delays per CPU. The host check
# (dprof-qemu-check causal-real-workload) computes each split from its profile and these
# times, and checks that every run was one experiment and that the summary gave the split.
# qemu-timeout: 500
set -eu
insmod "$DPROF_KO"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=65536 count=16 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/fetch.sh <<'WORKLOAD'
i=0
while [ $i -lt 40 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
WORKLOAD
baseline=5 runs=20 cpu_runs=10
# Centiseconds since boot (/proc/uptime), the clock busybox's sh can read.
now_cs() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}"; }
# The command alone: one wall time in ns per line.
: > "$OUT/baseline-ns"
i=0
while [ $i -lt $baseline ]; do
  t0=$(now_cs)
  sh /tmp/fetch.sh
  t1=$(now_cs)
  echo $(((t1 - t0) * 10000000)) >> "$OUT/baseline-ns"
  i=$((i + 1))
done
cat "$OUT/baseline-ns"
# One session: NAME, its run count, then dprof causal's extra options.
session() {
  name=$1 count=$2
  shift 2
  "$DPROF" causal -o "/tmp/$name.dprof" --end-to-end "$count" --fixed-speedup 50 --top 3 \
    --period 250us --seed 8 "$@" -- sh /tmp/fetch.sh 2> "/tmp/$name.err" ||
    { cat "/tmp/$name.err"; fail "dprof causal --end-to-end $* over wget and httpd failed"; }
  cat "/tmp/$name.err"
  cp "/tmp/$name.err" "$OUT/"
  grep -q "^dprof: overhead: startup (profiling phase and planning) " "/tmp/$name.err" ||
    fail "the summary of $name does not split the overhead"
  "$DPROF" report --view causal "/tmp/$name.dprof" > "/tmp/$name.txt" 2>&1 ||
    { cat "/tmp/$name.txt"; fail "the causal view of $name failed"; }
  cat "/tmp/$name.txt"
  cp "/tmp/$name.txt" "$OUT/"
  "$DPROF" report --view causal --json "/tmp/$name.dprof" > "$OUT/$name.json"
}
session task "$runs"
session cpu "$cpu_runs" --delay-accounting cpu
killall httpd
echo "causal real workload: guest checks passed"
