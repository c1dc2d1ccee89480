# Guest scenario: dprof.ko's kprobes registered and removed 400 times (one causal session per
# round: dprof-kprobe-churn) on vfs_read, which one dd per CPU calls millions of times a
# second. Under QEMU's multi-threaded TCG a vCPU can keep a stale translation of a removed
# int3, and the kernel then oopses on it ("Oops: int3"); the module rewrites a kprobe's bytes
# before removing it (dprof_shim.c, dprof_kprobe_settle). Without that, this load oopsed
# within 200 rounds. The harness fails the run on any kernel report, and the tool fails a round
# whose kprobe counted no visit.
# qemu-timeout: 400
set -eu
insmod "$DPROF_KO"
dmesg | grep -q "dprof: running under QEMU TCG" ||
  { echo "FAIL: dprof.ko did not say it runs under QEMU TCG"; dmesg | grep dprof; exit 1; }
for _ in $(seq "$(nproc)"); do
  dd if=/dev/zero of=/dev/null bs=1 count=2000000000 2> /dev/null &
done
status=0
dprof-kprobe-churn 400 vfs_read > /tmp/churn.out 2>&1 || status=$?
kill $(jobs -p) 2> /dev/null || true
wait 2> /dev/null || true
cat /tmp/churn.out
cp /tmp/churn.out "$OUT/churn.out"
[ "$status" = 0 ] || { echo "FAIL: dprof-kprobe-churn exited with $status"; exit 1; }
rmmod dprof
echo "kprobe removal: 400 rounds, no kernel report"
