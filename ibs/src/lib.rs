//! AMD IBS register decoding for dprof. Empty until the hardware-sampling issue lands.
#![no_std]
#![forbid(unsafe_code)]
