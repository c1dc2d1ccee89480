# Guest scenario: `dprof causal --end-to-end` over real programs no one here wrote (busybox
# httpd serving wget over loopback TCP), and its overhead split as Coz splits it: startup
# (the profiling run and planning), sampling (the 0% runs against the same command run
# alone) and delays (inserted by the sped-up runs). The command first runs alone BASELINE
# times, timed here; then dprof runs it 1 + RUNS times. The host check
# (dprof-qemu-check causal-real-workload) computes the split from the profile and these
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
baseline=5 runs=20
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
"$DPROF" causal -o /tmp/real.dprof --end-to-end "$runs" --fixed-speedup 50 --top 3 \
  --period 250us --seed 8 -- sh /tmp/fetch.sh 2> /tmp/real.err ||
  { cat /tmp/real.err; fail "dprof causal --end-to-end over wget and httpd failed"; }
cat /tmp/real.err
cp /tmp/real.err "$OUT/"
grep -q "^dprof: overhead: startup (profiling phase and planning) " /tmp/real.err ||
  fail "the summary does not split the overhead"
"$DPROF" report --view causal /tmp/real.dprof > /tmp/real.txt 2>&1 ||
  { cat /tmp/real.txt; fail "the causal view failed"; }
cat /tmp/real.txt
cp /tmp/real.txt "$OUT/"
"$DPROF" report --view causal --json /tmp/real.dprof > "$OUT/real.json"
killall httpd
echo "causal real workload: guest checks passed"
