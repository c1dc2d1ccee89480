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

/// The profiled kernel's debugging code, from the kallsyms snapshot the profile carries: as
/// the analysis sees it, whether it has KASAN and where its shadow is.
pub(crate) fn debugging_code(profile: &Profile) -> DebuggingCode {
    let symbols = Kallsyms::parse(profile.kallsyms());
    DebuggingCode::from_text_symbols(symbols.text_symbols())
}

/// Whether the profiled kernel has KASAN.
pub(crate) fn enabled(profile: &Profile) -> bool {
    debugging_code(profile).has_kasan()
}
