# Guest stress, not a CI scenario: the kernel's own kprobes (tracefs kprobe_events, no dprof
# code at all) registered, enabled, disabled and removed in a loop on a function every CPU
# runs flat out, to tell whether the "Oops: int3" seen about once in 19 causal runs under TCG
# comes from dprof's use of kprobes or from the emulator. The harness fails the run on any
# kernel report. Half the rounds keep the probe long enough for the kprobe optimizer (5
# jiffies) to turn its int3 into a jump, so both the int3 and the optimized paths come and go.
# Measured on vfs_read (QEMU 7.2, 2 vCPUs): the kernel's kprobes oops within 100 rounds,
# optimized or not (unoptimized mode); dprof.ko's kprobes without the rewrite of
# dprof_shim.c's dprof_kprobe_settle oopsed at round 100 to 200, with it 1000 rounds ran clean.
# The kprobe-removal scenario runs the dprof mode in CI.
#
#   tests/qemu/run --timeout 1200 tests/qemu/stress/kprobe-churn.sh [ROUNDS] [FUNCTION]
#   (FUNCTION: vfs_read by default, which dd drives; or dprof_selftest_causal_round)
#   tests/qemu/run ... kprobe-churn.sh ROUNDS FUNCTION unoptimized
#   (debug.kprobes-optimization=0: every probe stays an int3, none becomes a jump)
#   tests/qemu/run ... kprobe-churn.sh ROUNDS FUNCTION dprof
#   (dprof.ko's kprobes instead, one causal session per round: dprof-kprobe-churn)
#   DPROF_QEMU_ACCEL=tcg,thread=single tests/qemu/run ...   (one host thread for all vCPUs)
set -eu
rounds=${1:-400}
function=${2:-vfs_read}
mode=${3:-optimized}
tracing=/sys/kernel/tracing
[ -e "$tracing/kprobe_events" ] || mount -t tracefs nodev "$tracing"
case "$function" in
  dprof_selftest_*)
    # A function of dprof_selftest.ko (the causal scenario's progress point is
    # dprof_selftest_causal_round): its causal workload calls it, one minute at a time.
    insmod /lib/dprof/dprof_selftest.ko
    (while [ ! -e /tmp/stop ]; do echo 'causal 60000' > /sys/kernel/debug/dprof_selftest/run; done) &
    ;;
  *)
    # One reader per CPU: dd with 1-byte blocks makes a read() per byte, so vfs_read runs
    # millions of times a second between them.
    for _ in $(seq "$(nproc)"); do
      dd if=/dev/zero of=/dev/null bs=1 count=2000000000 2> /dev/null &
    done
    ;;
esac
if [ "$mode" = dprof ]; then
  insmod "$DPROF_KO"
  dmesg | grep "dprof" | tail -n 3
  dprof-kprobe-churn "$rounds" "$function"
  touch /tmp/stop
  kill $(jobs -p) 2> /dev/null || true
  wait 2> /dev/null || true
  rmmod dprof
  echo "kprobe-churn: $rounds rounds of dprof kprobes on $function, no kernel report"
  echo "$rounds dprof" > "$OUT/kprobe-churn"
  exit 0
fi
if [ "$mode" = unoptimized ]; then
  echo 0 > /proc/sys/debug/kprobes-optimization
  echo "kprobe-churn: kprobe optimization off: $(cat /proc/sys/debug/kprobes-optimization)"
fi
i=0
hits=0
while [ $i -lt "$rounds" ]; do
  echo "p:churn $function" > "$tracing/kprobe_events"
  echo 1 > "$tracing/events/kprobes/churn/enable"
  if [ $((i % 2)) = 0 ]; then sleep 0.2; fi
  echo 0 > "$tracing/events/kprobes/churn/enable"
  read -r _ n _ < "$tracing/kprobe_profile" || n=0
  hits=$((hits + n))
  echo "-:churn" >> "$tracing/kprobe_events"
  i=$((i + 1))
  if [ $((i % 100)) = 0 ]; then echo "kprobe-churn: $i rounds, $hits probe hits"; fi
done
touch /tmp/stop
kill $(jobs -p) 2> /dev/null || true
wait 2> /dev/null || true
echo "kprobe-churn: $rounds rounds on $function ($mode), $hits probe hits, no kernel report"
echo "$rounds $hits" > "$OUT/kprobe-churn"
