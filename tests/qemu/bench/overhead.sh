# Guest benchmark: slowdown of a real workload (busybox httpd + wget over loopback TCP, and a
# fork/exec/pipe loop) under collection at 1 kHz and 10 kHz per CPU, against no collection,
# and bytes per record. Each configuration runs ROUNDS times (default 5), alternating, and
# the median is kept; TCG timing is noisy. results.txt in $OUT.
set -eu
rounds=${1:-5}
insmod "$DPROF_KO"
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=64 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/workload.sh <<'WORKLOAD'
# Times itself, so that the collector's start-up (reading /proc/kallsyms) is not counted.
read -r up _ < /proc/uptime; start=$(( ${up%.*} * 1000 + 10 * ${up#*.} ))
i=0
while [ $i -lt 20 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
i=0
while [ $i -lt 100 ]; do echo "pipe $i" | cat | wc -c > /dev/null; i=$((i + 1)); done
read -r up _ < /proc/uptime; echo $(( ${up%.*} * 1000 + 10 * ${up#*.} - start )) > /tmp/elapsed
WORKLOAD
run() {  # run NAME [collect args...]: prints the workload's own wall time in ms
  name=$1; shift
  if [ "$name" = none ]; then sh /tmp/workload.sh; else "$DPROF" collect -o /tmp/ovh.dprof "$@" -- sh /tmp/workload.sh 2>/dev/null; fi
  cat /tmp/elapsed
}
median() { tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
none="" k1="" k10=""
r=0
while [ $r -lt "$rounds" ]; do
  none="$none $(run none)"
  k1="$k1 $(run 1khz --period 1ms)"
  k10="$k10 $(run 10khz --period 100us)"
  r=$((r + 1))
done
"$DPROF" dump --summary /tmp/ovh.dprof > /tmp/ovh.txt
m_none=$(echo $none | median); m_k1=$(echo $k1 | median); m_k10=$(echo $k10 | median)
{
  echo "workload wall time, median of $rounds (ms): none=$m_none [$none ], 1kHz=$m_k1 [$k1 ], 10kHz=$m_k10 [$k10 ]"
  awk -v a="$m_k1" -v b="$m_k10" -v n="$m_none" 'BEGIN { printf "slowdown: 1kHz %.2fx, 10kHz %.2fx\n", a / n, b / n }'
  echo "last 10kHz profile: $(grep -E '^(records|kinds):' /tmp/ovh.txt | tr '\n' ' ')"
} | tee "$OUT/results.txt"
killall httpd
rmmod dprof
