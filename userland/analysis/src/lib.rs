//! dprof's analysis: from a profile (bytes, through `dprof-format`) to the report model
//! (`dprof-model`). It does no device I/O and needs nothing of the machine the profile came
//! from; debug information is handed in as files the caller names, or as bytes (BTF).
//!
//! - [`decode`]: a sampled instruction to the address it touched (iced-x86);
//! - [`symbols`], [`debuginfo`], [`btf`]: kallsyms, DWARF and ELF symbols, and the BTF a
//!   profile carries (struct layouts when no vmlinux is given);
//! - [`resolve`]: an address at a time to a type, object and offset (the address set);
//!   [`instruction_types`]: an access's type from its instruction and DWARF, the second
//!   resolver;
//! - [`hardware`]: what IBS and PEBS say about an access;
//! - [`histories`], [`views`], [`cache`]: histories, path traces, data flow, miss
//!   classification and working set;
//! - [`causal`]: causal experiments to slopes and a ranking;
//! - [`pipeline`]: the passes over a profile's records, run in order, into one
//!   [`dprof_model::Report`]; [`report`] names structs and fields in it.

pub mod btf;
pub mod cache;
pub mod causal;
pub mod debuginfo;
pub mod decode;
pub mod hardware;
pub mod histories;
pub mod instruction_types;
pub mod kernel_debugging;
pub mod percpu_section;
pub mod pipeline;
pub mod profiler_code;
pub mod report;
pub mod resolve;
pub mod sampled;
pub mod summary;
pub mod symbols;
mod table;

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
