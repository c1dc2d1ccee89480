# Guest scenario: CPUs go offline and come back while dprof.ko collects samples and slab
# events, while it runs object access histories, and while causal experiments insert delays,
# in a 4-CPU guest. The harness fails the run on any kernel report (BUG, Oops, WARNING, lockdep,
# sleeping in atomic context); the host check wants each profile complete and, for every CPU
# that went away and came back, samples both before it left and after it returned.
# qemu-smp: 4
# qemu-timeout: 600
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
[ "$(cat /sys/devices/system/cpu/online)" = 0-3 ] || { echo "FAIL: want CPUs 0-3 online"; exit 1; }
# CPUs 2 and 3 go offline and online again, one after the other, ROUNDS times; the selftest's
# threads run on CPUs 0 and 1. Each transition is logged with its uptime (ns, centisecond
# resolution: the records' clock) for the host check: an offline once the CPU is off, an
# online before the CPU is brought back, so that the CPU is off all along between the two.
cat > /tmp/hotplug.sh <<'HOTPLUG'
log=$1; rounds=$2
uptime_ns() { awk '{ printf "%.0f\n", $1 * 1e9 }' /proc/uptime; }
busy() { j=0; while [ $j -lt 10000 ]; do j=$((j + 1)); done; }
i=0
while [ $i -lt "$rounds" ]; do
  for cpu in 2 3; do
    busy
    echo 0 > /sys/devices/system/cpu/cpu$cpu/online
    echo "$(uptime_ns) $cpu offline" >> "$log"
    sleep 0.3
    echo "$(uptime_ns) $cpu online" >> "$log"
    echo 1 > /sys/devices/system/cpu/cpu$cpu/online
    busy
  done
  i=$((i + 1))
done
# Work for every CPU once all are back, so that each is sampled after its return.
busy & busy & busy & busy & wait
HOTPLUG
# 1. Samples and slab events.
"$DPROF" collect -o /tmp/samples.dprof --events slab,samples --period 500us --ring-size 16M -- \
  sh -c "echo 'handoff 9000' > $run & sh /tmp/hotplug.sh $OUT/samples.hotplug 2; wait"
cp /tmp/samples.dprof "$OUT/"; rm /tmp/samples.dprof
[ "$(cat /sys/devices/system/cpu/online)" = 0-3 ] || { echo "FAIL: CPUs left offline"; exit 1; }

# 2. Histories: the other CPUs' debug registers are pointed at each object by IPI. Once CPUs 2
# and 3 are back, a handoff between them: their breakpoints must have been made anew.
"$DPROF" collect -o /tmp/histories.dprof --events slab --histories dprof_selftest_obj:8+8:16+8 \
  --history-rate 200 -- \
  sh -c "echo 'handoff 9000' > $run & sh /tmp/hotplug.sh $OUT/histories.hotplug 2; wait
         echo 'handoff 2000 2 3' > $run"
cp /tmp/histories.dprof "$OUT/"; rm /tmp/histories.dprof

# 3. Causal experiments: delays and pauses on every CPU, a kprobe progress point.
"$DPROF" causal -o /tmp/causal.dprof --types dprof_selftest_causal_x --plan-time 1s \
  --progress kprobe:dprof_selftest_causal_round --experiment 200ms --period 1ms --seed 3 -- \
  sh -c "echo 'causal 10000' > $run & sleep 2; sh /tmp/hotplug.sh $OUT/causal.hotplug 2; wait" \
  2> /tmp/causal.err || { cat /tmp/causal.err; exit 1; }
cp /tmp/causal.dprof "$OUT/"; rm /tmp/causal.dprof

rmmod dprof_selftest
rmmod dprof
