#!/usr/bin/env bash
# Fuzzes every dprof fuzz target with libFuzzer for SECONDS seconds each, on stable Rust:
# profile_reader (the profile reader), profile_blocks (format version 2's coded records) and
# ibs_decoder (the AMD IBS op decoder), one after the other, so the whole run takes about
# SECONDS times the number of targets.
#
# cargo-fuzz needs nightly only for -Zsanitizer; libFuzzer's coverage feedback itself comes
# from LLVM's sancov pass, which stable rustc runs with -Cpasses=sancov-module. So this builds
# the targets with the flags cargo-fuzz would use minus AddressSanitizer (safe Rust needs it
# little; panics, overflow checks and debug assertions are the crashes we look for), into its
# own target dir so those flags never invalidate the main build.
#
# Usage: userland/fuzz/run.sh SECONDS [extra libFuzzer flags...]
# Each target keeps its corpus in userland/fuzz/corpus/TARGET and its crashes in
# userland/fuzz/artifacts/TARGET. Exit status: 0 when every target ran out its time with no
# crash, non-zero when libFuzzer found one in any (every target still runs).
set -euo pipefail

seconds=${1:?usage: run.sh SECONDS [libFuzzer flags...]}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
# Target and its -max_len: a profile can be large; an IBS op blob is at most 76 bytes, and a
# little slack lets the fuzzer try wrong lengths.
targets=(profile_reader:65536 profile_blocks:16384 ibs_decoder:256)

# Seeds are written by an ordinary build (same flags and target dir as the workspace's).
for entry in "${targets[@]}"; do
    target=${entry%%:*}
    mkdir -p "$here/corpus/$target" "$here/artifacts/$target"
    cargo run --quiet --manifest-path "$root/Cargo.toml" -p dprof-fuzz --bin write_seeds -- \
        "$here/corpus/$target" "$target"
done

# --target keeps the sancov flags off build scripts and proc macros. No LTO: the coverage pass
# instruments each crate as it is compiled, as cargo-fuzz builds do.
bins=()
for entry in "${targets[@]}"; do bins+=(--bin "${entry%%:*}"); done
RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    CARGO_PROFILE_RELEASE_LTO=false \
    cargo build --release --manifest-path "$root/Cargo.toml" -p dprof-fuzz \
    --features libfuzzer "${bins[@]}" \
    --target "$host" --target-dir "$here/target"

failed=0
for entry in "${targets[@]}"; do
    target=${entry%%:*}
    max_len=${entry#*:}
    fuzzer=$here/target/$host/release/$target
    corpus=$here/corpus/$target
    artifacts=$here/artifacts/$target
    echo "run.sh: fuzzing $target for $seconds s" >&2
    before=$(find "$artifacts" -type f | wc -l)
    status=0
    "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" "$corpus" || status=$?
    after=$(find "$artifacts" -type f | wc -l)
    if [ "$status" -ne 0 ] || [ "$after" -gt "$before" ]; then
        echo "run.sh: the fuzzer found a crash in $target (exit status $status); inputs in $artifacts:" >&2
        ls -1t "$artifacts" >&2
        echo "run.sh: reproduce with: $fuzzer ARTIFACT" >&2
        [ "$failed" -ne 0 ] || failed=$((status == 0 ? 1 : status))
    else
        echo "run.sh: no crash in $target in $seconds s" >&2
    fi
done
exit "$failed"
