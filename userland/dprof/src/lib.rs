//! dprof library: the profile file, the `/dev/dprof` client, symbols and summaries.
//!
//! The profile side ([`profile`], [`symbols`], [`summary`], [`hardware`]) does no device I/O
//! and reads profiles from bytes, so analysis never needs the machine a profile came from. The
//! collector side ([`device`], [`system`], [`samplers`]) talks to the module and the live
//! system; nothing in the profile side depends on it.

pub mod analysis;
pub mod cache;
pub mod causal_analysis;
pub mod debuginfo;
pub mod decode;
pub mod device;
pub mod hardware;
pub mod histories;
pub mod kcore;
pub mod profile;
pub mod report;
pub mod resolve;
pub mod samplers;
pub mod summary;
pub mod symbols;
pub mod system;
mod table;
pub mod units;
pub mod views;

/// Asks the CPU to bring the cache line of `r` into its caches: the analysis calls it for
/// data that a record a few records later will need (see [`analysis`]).
#[inline]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing architecturally and cannot fault
    // (the address comes from a live reference anyway). `prefetcht0` is in SSE, which every
    // x86-64 CPU has.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(r).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Version of this library, written into every profile.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
