# Guest scenario: sampler selection on a machine without IBS or PEBS (TCG exposes no hardware
# PMU, as a typical hypervisor):
#   1. --sampler auto falls back to the software sampler and says which it picked and why;
#   2. --sampler ibs and --sampler pebs fail with one clear sentence and a non-zero exit, and
#      leave no profile behind;
#   3. the module still loads, and the software path works afterwards: a profile with access
#      samples that `dprof report` reads.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
insmod "$DPROF_KO"

echo "== 1. auto picks software"
"$DPROF" collect --sampler auto -o /tmp/auto.dprof --duration 2s 2>/tmp/auto.err ||
  fail "collect --sampler auto: $(cat /tmp/auto.err)"
grep -i "sampler: software" /tmp/auto.err || fail "auto did not say it picked software: $(cat /tmp/auto.err)"
grep -i "ibs" /tmp/auto.err > /dev/null || fail "auto did not say why not IBS: $(cat /tmp/auto.err)"
grep -i "pebs" /tmp/auto.err > /dev/null || fail "auto did not say why not PEBS: $(cat /tmp/auto.err)"

echo "== 2. absent hardware samplers are refused"
for sampler in ibs pebs; do
  status=0
  "$DPROF" collect --sampler $sampler -o /tmp/$sampler.dprof --duration 1s 2>/tmp/$sampler.err ||
    status=$?
  [ "$status" != 0 ] || fail "--sampler $sampler succeeded on a machine without it"
  echo "--sampler $sampler: exit $status: $(cat /tmp/$sampler.err)"
  [ "$(wc -l < /tmp/$sampler.err)" -le 2 ] || fail "--sampler $sampler: more than one sentence"
  grep -qi "$sampler" /tmp/$sampler.err || fail "--sampler $sampler: the message does not name it"
  grep -qi "software" /tmp/$sampler.err || fail "--sampler $sampler: no alternative named"
  [ ! -e /tmp/$sampler.dprof ] && [ ! -e /tmp/$sampler.dprof.partial ] ||
    fail "--sampler $sampler left a profile behind"
done

echo "== 3. the software path still works"
rmmod dprof
insmod "$DPROF_KO"
"$DPROF" collect --sampler software -o /tmp/software.dprof --duration 2s ||
  fail "collect --sampler software"
"$DPROF" dump --summary /tmp/software.dprof > /tmp/summary.txt || fail "dump of the software profile"
grep -E "sample" /tmp/summary.txt || fail "no samples in the software profile: $(cat /tmp/summary.txt)"
"$DPROF" report /tmp/auto.dprof > /tmp/report.txt || fail "report of the auto profile"
grep -qi "coverage" /tmp/report.txt || fail "the report has no coverage line"
rmmod dprof
echo "hardware samplers: all checks passed"
