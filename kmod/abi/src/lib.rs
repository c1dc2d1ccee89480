//! `dprof-abi`: the records and ioctl structures shared by `dprof.ko` and userland.
//!
//! The definitions live in `wire.rs`, which the kernel module includes with `#[path]`; this
//! crate root only makes them a `#![no_std]` crate for Cargo.
#![no_std]
#![forbid(unsafe_code)]

mod wire;
pub use wire::*;

#[cfg(test)]
mod tests;
