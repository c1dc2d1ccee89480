//! The profiler's own code in the kernel: dprof.ko, and the kernel's perf events code, which
//! dprof's samplers and the perf backend's tracepoint events run (`perf_tp_event`,
//! `perf_output_*`, `perf_trace_kmalloc`, ... in kernel/events and the trace events' perf
//! glue). A sample there caught the profiler at work in whatever task it interrupted, the
//! workload's included: its data accesses are none of the workload's. The other half of the
//! profiler's share, the collecting process's own kernel work, is recognised by its pid.

use std::ops::Range;

use crate::symbols::{function_has_prefix, CodeRanges, Symbol};

/// Function name prefixes of the kernel's perf events code, compared with a symbol's name
/// without its compiler suffix (`perf_event_output.part.0`).
const PERF_EVENTS_PREFIXES: &[&str] = &["perf_", "__perf_", "___perf_"];

/// Whether `name` is a function of the kernel's perf events code.
#[must_use]
pub fn is_perf_events_function(name: &str) -> bool {
    function_has_prefix(name, PERF_EVENTS_PREFIXES)
}

/// Where the profiler's code is in one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfilerCode(CodeRanges);

impl ProfilerCode {
    /// dprof.ko's text (`module`, when it was loaded) and the perf events functions among
    /// `text` (code symbols sorted by address, sizes set).
    #[must_use]
    pub fn new(module: Option<Range<u64>>, text: &[Symbol]) -> Self {
        let mut ranges = CodeRanges::of_functions(text, |s| {
            s.module.is_none() && is_perf_events_function(&s.name)
        });
        if let Some(module) = module {
            ranges.insert(module);
        }
        Self(ranges)
    }

    /// Whether `ip` is in the profiler's code.
    #[inline]
    #[must_use]
    pub fn contains(&self, ip: u64) -> bool {
        self.0.contains(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Kallsyms;

    #[test]
    fn perf_events_functions_are_the_profiler_s_and_others_are_not() {
        for name in [
            "perf_tp_event",
            "perf_output_begin_forward",
            "__perf_event_overflow",
            "___perf_sw_event",
            "perf_trace_kmalloc",
            "perf_prepare_sample.part.0",
        ] {
            assert!(is_perf_events_function(name), "{name}");
        }
        for name in [
            "kmem_cache_alloc_noprof",
            "x86_perf_event_update",
            "superf_x",
        ] {
            assert!(!is_perf_events_function(name), "{name}");
        }
    }

    #[test]
    fn the_profiler_s_code_is_dprof_ko_and_the_kernel_s_perf_events_code() {
        let k = Kallsyms::parse(
            b"ffffffff81000000 T tcp_sendmsg\n\
              ffffffff81000100 T perf_tp_event\n\
              ffffffff81000200 t perf_output_begin\n\
              ffffffff81000300 T kfree\n\
              ffffffffc0000000 t dprof_shim_alloc_trace\t[dprof]\n\
              ffffffffc0000400 t dprof_rs_read\t[dprof]\n\
              ffffffffc0010000 t perf_like_helper\t[other]\n\
              ffffffffc0010100 t other_fn\t[other]\n",
        );
        let code = ProfilerCode::new(
            k.module_text(crate::symbols::PROFILER_MODULE),
            k.text_symbols(),
        );
        assert!(!code.contains(0xffff_ffff_8100_00ff));
        assert!(code.contains(0xffff_ffff_8100_0100));
        assert!(code.contains(0xffff_ffff_8100_02ff));
        assert!(!code.contains(0xffff_ffff_8100_0300));
        assert!(code.contains(0xffff_ffff_c000_0010));
        assert!(code.contains(0xffff_ffff_c000_0410));
        // Another module's function is its own, whatever its name.
        assert!(!code.contains(0xffff_ffff_c001_0010));
        // Without dprof.ko (the perf backend), the perf events code alone.
        let perf = ProfilerCode::new(None, k.text_symbols());
        assert!(perf.contains(0xffff_ffff_8100_0100));
        assert!(!perf.contains(0xffff_ffff_c000_0010));
    }
}
