//! x86-64 debug registers for dprof: typed DR7 (control) and DR6 (status) encoding and
//! decoding, aligned watches for DR0..DR3, and a splitter from byte ranges to watches.
//!
//! Everything lives in `src/dr.rs`, which uses only `core` and refers to nothing outside
//! itself, so the kernel module can include that one file as a module
//! (`#[path = "../debugreg/src/dr.rs"] mod debugreg;`) while userland uses this crate.
#![no_std]
#![forbid(unsafe_code)]

mod dr;

pub use dr::*;
