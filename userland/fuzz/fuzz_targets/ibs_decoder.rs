//! libFuzzer target: the IBS op decoder and its interpretation on arbitrary bytes. Built by
//! `run.sh`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dprof_fuzz::ibs::ibs_decoder(data);
});
