//! What the checks allow for on a KASAN kernel (the debug variant):
//!
//! - its quarantine: a freed object fires the free tracepoint, then waits in a quarantine (up
//!   to 1/32 of memory) before SLUB takes it back. Until then SLUB still counts it as active,
//!   has not counted its free, and never hands its address out again. How many objects of
//!   each cache the quarantine holds is not published.
//! - its shadow memory, which instrumented code reads before each access it checks.

use dprof_analysis::kernel_debugging::DebuggingCode;
use dprof_analysis::symbols::Kallsyms;
use dprof_format::Profile;

/// Whether the profiled kernel has KASAN, from the kallsyms snapshot the profile carries.
pub(crate) fn enabled(profile: &Profile) -> bool {
    let symbols = Kallsyms::parse(profile.kallsyms());
    DebuggingCode::from_text_symbols(symbols.text_symbols()).has_kasan()
}

/// Whether `addr` is in KASAN's shadow of the kernel half with 4-level paging, which the
/// guest runs (`KASAN_SHADOW_START` to `KASAN_SHADOW_END`,
/// `Documentation/arch/x86/x86_64/mm.rst`).
pub(crate) fn is_shadow(addr: u64) -> bool {
    (0xffff_ec00_0000_0000..0xffff_fc00_0000_0000).contains(&addr)
}
