# Guest scenario: object access histories of real kernel types, under programs no one here
# wrote. Checked on the host by kernel-histories.check.
#   1. skbuff_head_cache (sk_buff's first two pointers, as a pair) while busybox wget fetches
#      over loopback TCP; the same workload timed without dprof and with slab events only, to
#      measure what histories cost. Then the whole sk_buff (full:), merged per history set.
#   2. Stress: the highest history rate the module allows, a short timeout and several busy
#      types at once (one with all four debug registers), for 60 s of guest time, with the
#      selftest handoff, loopback TCP and a fork/pipe loop running; then the module's counters
#      must show no debug register armed or reserved.
set -eu
# Whether this machine's debug registers report traps for accesses outside the watched bytes
# (QEMU's TCG does for unaligned stores; real CPUs never do): the check needs to know.
dprof-bp-probe > "$OUT/bp-probe"
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=64 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/fetch.sh <<'WORKLOAD'
i=0
while [ $i -lt 40 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
WORKLOAD
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
timed() {
  start=$(now_ms); "$@"; end=$(now_ms); echo $((end - start))
}
# Warm up the page cache and httpd, then time the workload three ways.
sh /tmp/fetch.sh
plain_ms=$(timed sh /tmp/fetch.sh)
slab_ms=$(timed "$DPROF" collect -o /tmp/slab.dprof --events slab -- sh /tmp/fetch.sh)
hist_ms=$(timed "$DPROF" collect -o /tmp/skb.dprof --events slab --history-rate 1000 \
  --histories skbuff_head_cache:0+8:8+8 -- sh /tmp/fetch.sh)
echo "$plain_ms $slab_ms $hist_ms" > "$OUT/timings"
cp /tmp/skb.dprof "$OUT/"
# The whole sk_buff: every pair of its chunks watched together by some target of four. Under
# TCG a history of an sk_buff takes about 70 ms (its traps are slow), and a set is one history
# of each of about 80 targets, so the fetches go on for 40 s.
cat > /tmp/fetch-for.sh <<'WORKLOAD'
end=$(( $(awk '{ printf "%d\n", $1 }' /proc/uptime) + $1 ))
while [ "$(awk '{ printf "%d\n", $1 }' /proc/uptime)" -lt "$end" ]; do sh /tmp/fetch.sh; done
WORKLOAD
"$DPROF" collect -o /tmp/skb-full.dprof --events slab --history-rate 1000 \
  --histories full:skbuff_head_cache -- sh /tmp/fetch-for.sh 40
cp /tmp/skb-full.dprof "$OUT/"

cat > /tmp/stress.sh <<'WORKLOAD'
end=$(( $(awk '{ printf "%d\n", $1 }' /proc/uptime) + 61 ))
while [ "$(awk '{ printf "%d\n", $1 }' /proc/uptime)" -lt "$end" ]; do
  echo 'handoff 500' > /sys/kernel/debug/dprof_selftest/run
  wget -q -O /dev/null http://127.0.0.1:8080/blob
  i=0
  while [ $i -lt 20 ]; do echo "pipe $i" | cat | wc -c > /dev/null; i=$((i + 1)); done
done
WORKLOAD
"$DPROF" collect -o /tmp/stress.dprof --events slab --history-rate 1000 --history-timeout 20ms \
  --history-max-hits 256 --ring-size 16M \
  --histories dprof_selftest_obj:8+8:16+8,skbuff_head_cache:0+8:8+8:16+8:24+8,kmalloc-64:0+8,filp:0+8,anon_vma_chain:0+8,vm_area_struct:0+8 \
  -- sh /tmp/stress.sh
cp /tmp/stress.dprof "$OUT/"
killall httpd
rmmod dprof_selftest
rmmod dprof
