# Guest scenario: the miss classification and working set views against dprof_selftest.ko
# workloads with one known cause of misses each (kmod/selftest/misses.rs): false sharing
# (dprof_selftest_pair), true sharing (dprof_selftest_shared), conflict (dprof_selftest_stride)
# and capacity (dprof_selftest_sweep). One profile per case, so that one case's objects never
# enter another's working set; histories on the sharing cases, which the classification of
# coherence misses needs. During the capacity run /proc/slabinfo is sampled for the working
# set's live-object counts. Checked on the host by selftest-misses.check.
set -eu
insmod "$DPROF_KO"
insmod /lib/dprof/dprof_selftest.ko
run=/sys/kernel/debug/dprof_selftest/run
# Profiles are written to /tmp and copied out afterwards (9p traffic would enter them).
collect() {
  name=$1; shift
  start=$(date +%s)
  "$DPROF" collect -o "/tmp/$name.dprof" --events slab,samples --period 100us --ring-size 32M "$@"
  cp "/tmp/$name.dprof" "$OUT/"
  rm "/tmp/$name.dprof"
  echo "$name: $(( $(date +%s) - start )) s" >> "$OUT/timings"
}
# Histories watch both counters of a pair, and the mailbox; a round lives a few ms.
collect falseshare --histories dprof_selftest_pair:0+8:32+8 --history-rate 200 -- \
  sh -c "echo 'falseshare 4000' > $run"
collect trueshare --histories dprof_selftest_shared:0+8 --history-rate 200 -- \
  sh -c "echo 'trueshare 4000' > $run"
collect conflict -- sh -c "echo 'conflict 3000' > $run"
# The sampler refuses a cache that does not exist, naming it, and writes nothing.
if dprof-slabinfo-sample no_such_cache 20 /tmp/none.samples 2> /tmp/sampler.err; then
  echo "FAIL: the slabinfo sampler accepted a missing cache"; exit 1
fi
grep -q "no slab cache named no_such_cache" /tmp/sampler.err || { echo "FAIL: unclear error:"; cat /tmp/sampler.err; exit 1; }
[ ! -e /tmp/none.samples ] || { echo "FAIL: the sampler left a file"; exit 1; }
# KFENCE (debug kernels) serves some allocations from its pool, which slabinfo does not count.
kfence=/sys/kernel/debug/kfence/stats
[ -r $kfence ] && cp $kfence "$OUT/kfence.before"
dprof-slabinfo-sample dprof_selftest_sweep 20 /tmp/slabinfo.samples &
sampler=$!
collect capacity -- sh -c "echo 'capacity 8000' > $run"
kill -TERM "$sampler"
wait "$sampler"
[ -r $kfence ] && cp $kfence "$OUT/kfence.after"
cp /tmp/slabinfo.samples "$OUT/"
# The module's DWARF, for field names on the host.
cp /lib/dprof/dprof_selftest.ko "$OUT/"
rmmod dprof_selftest
rmmod dprof
