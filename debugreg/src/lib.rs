//! x86 debug register (DR7/DR6) encoding for dprof. Empty until the object-history issue lands.
#![no_std]
#![forbid(unsafe_code)]
