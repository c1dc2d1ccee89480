//! libFuzzer target: the profile reader on arbitrary bytes. Built by `run.sh`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dprof_fuzz::profile_reader(data);
});
