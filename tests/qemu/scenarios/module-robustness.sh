# Guest scenario: dprof.ko must survive abuse without an oops (the harness fails the run on
# BUG/Oops/WARNING in the kernel log):
#   1. load and unload 20 times;
#   2. rmmod while a collector runs, while histories are armed and while causal experiments
#      run is refused, and each collection finishes and is valid;
#   3. a collector killed with SIGKILL leaves no finished profile, and the next collect works;
#   4. a second open of /dev/dprof gets EBUSY;
#   5. the causal ioctls give their documented errnos in every state (bad plans, unknown
#      kprobes and tracepoints, experiments in the wrong state, user-point writes), user-point
#      writers race 30 session closes, then 10,000 random ioctl/read/write calls (causal ones
#      included) get only EINVAL/ENOTTY/EFAULT/EBUSY/EAGAIN/ENOMEM, and ENOENT/EOPNOTSUPP/ENODEV
#      when perf refuses a hardware sampler's PMU at START or a progress point does not exist;
#   6. a causal experiment at 50% on a spinning loop's instructions: a user point written N
#      times through an O_WRONLY open counts exactly N visits, a kprobe on __x64_sys_getppid at
#      least the getppid() calls made, and the pauses served plus the delay credited to idle
#      CPUs are within 20% of delay x (CPUs - 1); a 0% experiment inserts no delay. Three
#      times: other CPUs busy (pauses in the sampler's handler), idle (credited), and busy with
#      pauses deferred to an irq_work (the NMI path); then arrivals: N visits of an arrival
#      point at D ns each insert exactly N x D, which a busy child process serves.
set -eu
fail() { echo "FAIL: $*"; exit 1; }

echo "== 1. load/unload x20"
i=0
while [ $i -lt 20 ]; do
  insmod "$DPROF_KO" || fail "insmod #$i"
  [ -c /dev/dprof ] || fail "/dev/dprof missing after insmod #$i"
  rmmod dprof || fail "rmmod #$i"
  [ ! -e /dev/dprof ] || fail "/dev/dprof still there after rmmod #$i"
  i=$((i + 1))
done
insmod "$DPROF_KO"
mode=$(stat -c %a /dev/dprof)
[ "$mode" = 600 ] || fail "/dev/dprof has mode $mode, want 600"

echo "== 2. rmmod while collecting"
"$DPROF" collect -o /tmp/rm.dprof --duration 4s &
collector=$!
sleep 2
if rmmod dprof 2>/dev/null; then fail "rmmod succeeded while /dev/dprof was open"; fi
wait $collector || fail "collector failed after the refused rmmod"
"$DPROF" dump --summary /tmp/rm.dprof > /dev/null || fail "profile of the rmmod test unreadable"
echo "rmmod refused while collecting; profile complete"
# The same while debug registers watch objects (histories) and while experiments delay CPUs
# through a kprobe progress point: the module must stay, and the session end cleanly.
cat > /tmp/opens.sh <<'WORKLOAD'
end=$(( $(awk '{ printf "%d\n", $1 }' /proc/uptime) + $1 ))
while [ "$(awk '{ printf "%d\n", $1 }' /proc/uptime)" -lt "$end" ]; do
  i=0
  while [ $i -lt 50 ]; do cat /proc/version > /dev/null; i=$((i + 1)); done
done
WORKLOAD
"$DPROF" collect -o /tmp/rm-hist.dprof --events slab --history-rate 1000 \
  --histories filp:0+8 -- sh /tmp/opens.sh 5 &
collector=$!
sleep 3
if rmmod dprof 2>/dev/null; then fail "rmmod succeeded while histories were armed"; fi
wait $collector || fail "collector with histories failed after the refused rmmod"
histories=$("$DPROF" dump --summary /tmp/rm-hist.dprof | sed -n 's/^kinds: .* history=\([0-9]*\) .*/\1/p')
[ "${histories:-0}" -gt 0 ] || fail "no history records in the profile of the rmmod test"
"$DPROF" causal -o /tmp/rm-causal.dprof --functions vfs_read --progress kprobe:vfs_read \
  --plan-time 1s --experiment 200ms -- sh /tmp/opens.sh 6 &
causal=$!
sleep 4
if rmmod dprof 2>/dev/null; then fail "rmmod succeeded while experiments ran"; fi
wait $causal || fail "causal run failed after the refused rmmod"
experiments=$("$DPROF" dump /tmp/rm-causal.dprof | grep -c " experiment=" || true)
[ "$experiments" -gt 0 ] || fail "no experiment records in the profile of the rmmod test"
echo "rmmod refused with $histories history records and $experiments experiment records; profiles complete"

echo "== 3. SIGKILL mid-run"
"$DPROF" collect -o /tmp/killed.dprof --duration 60s &
collector=$!
# Kill it mid-run: once its partial file exists and records are flowing.
i=0
while [ ! -e /tmp/killed.dprof.partial ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
[ -e /tmp/killed.dprof.partial ] || fail "the collector never created /tmp/killed.dprof.partial"
sleep 1
kill -9 $collector
wait $collector 2>/dev/null || true
[ ! -e /tmp/killed.dprof ] || fail "a killed collector left a finished-looking profile"
if "$DPROF" dump /tmp/killed.dprof.partial > /dev/null 2>/tmp/partial.err; then
  fail "the partial profile of a killed collector reads as complete"
fi
echo "partial profile refused: $(cat /tmp/partial.err)"
"$DPROF" collect -o /tmp/after-kill.dprof --duration 1s || fail "collect after SIGKILL"
"$DPROF" dump --summary /tmp/after-kill.dprof > /dev/null || fail "profile after SIGKILL unreadable"

echo "== 4. one collector at a time"
"$DPROF" collect -o /tmp/first.dprof --duration 6s &
collector=$!
# Only once the first collector holds the device (its .partial file is created after the open;
# on a loaded host its start-up can take seconds).
i=0
while [ ! -e /tmp/first.dprof.partial ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
[ -e /tmp/first.dprof.partial ] || fail "the first collector never created /tmp/first.dprof.partial"
if "$DPROF" collect -o /tmp/second.dprof --duration 1s 2>/tmp/busy.err; then
  fail "a second collector could open /dev/dprof"
fi
grep -qi "another collector" /tmp/busy.err || fail "second collector's error does not say why: $(cat /tmp/busy.err)"
wait $collector || fail "first collector failed"
[ ! -e /tmp/second.dprof ] || fail "the refused collector wrote a profile"

echo "== 5. random ioctls"
dprof-ioctl-fuzz 10000 || fail "ioctl fuzz"
"$DPROF" collect -o /tmp/after-fuzz.dprof --duration 1s || fail "collect after the fuzz"

echo "== 6. causal experiment"
dprof-causal-probe 1000 500 2000 busy || fail "causal experiment"
# Idle CPUs are credited the delay instead of pausing.
dprof-causal-probe 1000 500 2000 idle || fail "causal experiment, idle CPUs"
# The same with every pause deferred to the irq_work, as hardware samplers' NMI handlers do.
dprof-causal-probe 1000 500 2000 deferred || fail "causal experiment, deferred pauses"
# Per task: the busy work runs in child processes, which owe every delay and pause.
dprof-causal-probe 1000 500 2000 task || fail "causal experiment, per task"
# Arrivals: each inserts its delay exactly, for the other tasks to serve.
dprof-arrival-probe 500 1500 || fail "arrival delays"
rmmod dprof || fail "final rmmod"
echo "module robustness: all checks passed"
