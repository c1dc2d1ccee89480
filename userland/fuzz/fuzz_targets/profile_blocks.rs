//! libFuzzer target: format version 2's coded records, framed as one Block section of a
//! well-formed profile. Built by `run.sh`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dprof_fuzz::blocks::profile_blocks(data);
});
