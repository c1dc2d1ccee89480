# Guest scenario: the same real workload (busybox httpd serving wget over loopback TCP,
# busybox nc over loopback, a fork/exec/pipe loop; the one of workload-data-profile) collected
# twice at 10 kHz per CPU, once with dprof.ko (--backend module) and once with perf events and
# the kmem tracepoints (--backend perf, module unloaded), then a short collection with no
# --backend and no module, whose stderr must say it chose perf events. Checked on the host by
# backends-agree.check: the two runs' top slab types and per-cache allocations must agree.
# qemu-timeout: 600
set -eu
# Profiles and logs are written to /tmp and copied out afterwards: writing them over 9p while
# collecting would put the 9p client's own traffic into the profile.
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=4096 count=256 2>/dev/null
httpd -p 127.0.0.1:8080 -h /tmp/www
cat > /tmp/workload.sh <<'WORKLOAD'
i=0
while [ $i -lt 30 ]; do wget -q -O /dev/null http://127.0.0.1:8080/blob; i=$((i + 1)); done
nc -l -p 9000 > /dev/null &
listener=$!
sleep 1
dd if=/dev/zero bs=65536 count=200 2>/dev/null | nc 127.0.0.1 9000
wait $listener || true
i=0
while [ $i -lt 200 ]; do echo "pipe $i" | cat | wc -c > /dev/null; i=$((i + 1)); done
WORKLOAD

# Copies whatever exists so far to $OUT, so that a failed step leaves its logs to read.
save() {
  for f in /tmp/module.dprof /tmp/perf.dprof /tmp/auto.dprof /tmp/*.stderr /tmp/tracefs.txt; do
    [ -f "$f" ] && cp "$f" "$OUT/"
  done
  return 0
}
# collect NAME ARGS...: dprof collect with its stderr kept in /tmp/NAME.stderr and shown.
collect() {
  name=$1
  shift
  status=0
  "$DPROF" collect "$@" 2> "/tmp/$name.stderr" || status=$?
  cat "/tmp/$name.stderr"
  if [ "$status" != 0 ]; then
    echo "backends-agree: dprof collect ($name) exited with status $status"
    save
    exit 1
  fi
}

# One pass before anything is measured: the first run of each program fills the dentry,
# inode and page caches, and whichever backend ran first would otherwise pay for it alone.
sh /tmp/workload.sh

insmod "$DPROF_KO"
collect module --backend module --events slab,samples --period 100us -o /tmp/module.dprof -- sh /tmp/workload.sh
rmmod dprof

# tracefs is not mounted by the guest's init: the perf backend mounts it (and says so) unless
# debugfs's automount at /sys/kernel/debug/tracing already gives it one.
{ echo "before:"; grep tracefs /proc/mounts || true; } > /tmp/tracefs.txt
collect perf --backend perf --period 100us -o /tmp/perf.dprof -- sh /tmp/workload.sh
{ echo "after:"; grep tracefs /proc/mounts || true; } >> /tmp/tracefs.txt
cat /tmp/tracefs.txt

[ ! -e /dev/dprof ] || { echo "backends-agree: /dev/dprof exists after rmmod"; save; exit 1; }
collect auto -o /tmp/auto.dprof --duration 1s

killall httpd
save
