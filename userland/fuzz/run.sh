#!/usr/bin/env bash
# Fuzzes the dprof profile reader with libFuzzer for SECONDS seconds, on stable Rust.
#
# cargo-fuzz needs nightly only for -Zsanitizer; libFuzzer's coverage feedback itself comes
# from LLVM's sancov pass, which stable rustc runs with -Cpasses=sancov-module. So this builds
# the target with the flags cargo-fuzz would use minus AddressSanitizer (safe Rust needs it
# little; panics, overflow checks and debug assertions are the crashes we look for), into its
# own target dir so those flags never invalidate the main build.
#
# Usage: userland/fuzz/run.sh SECONDS [extra libFuzzer flags...]
# Exit status: 0 when the time ran out with no crash, non-zero when libFuzzer found one (the
# input is saved under userland/fuzz/artifacts/profile_reader/).
set -euo pipefail

seconds=${1:?usage: run.sh SECONDS [libFuzzer flags...]}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
corpus=$here/corpus/profile_reader
artifacts=$here/artifacts/profile_reader

# Seeds are written by an ordinary build (same flags and target dir as the workspace's).
mkdir -p "$corpus" "$artifacts"
cargo run --quiet --manifest-path "$root/Cargo.toml" -p dprof-fuzz --bin write_seeds -- "$corpus"

# --target keeps the sancov flags off build scripts and proc macros.
RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    cargo build --release --manifest-path "$root/Cargo.toml" -p dprof-fuzz \
    --features libfuzzer --bin profile_reader \
    --target "$host" --target-dir "$here/target"

fuzzer=$here/target/$host/release/profile_reader
before=$(find "$artifacts" -type f | wc -l)
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" "$corpus" || status=$?
after=$(find "$artifacts" -type f | wc -l)
if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
    echo "run.sh: the fuzzer found a crash (exit status $status); inputs in $artifacts:" >&2
    ls -1t "$artifacts" >&2
    echo "run.sh: reproduce with: $fuzzer ARTIFACT" >&2
    exit $((status == 0 ? 1 : status))
fi
echo "run.sh: no crash in $seconds s" >&2
