//! The kernel's own debugging code: sanitizers (KASAN, KFENCE, KCSAN, KMSAN, UBSAN), lockdep
//! and the lock and atomic-sleep checks, kmemleak, debugobjects, list checks, and the stack
//! walks they record. Kernel developers and some distributions run kernels with them; their
//! work is none of the workload's data accesses, and on a KASAN and lockdep kernel it takes a
//! tenth of the samples or more (`lock_acquire`, `unwind_next_frame`, `kasan_check_range`).
//! Samples there go to their own bucket, so that rankings of types leave them out and the
//! coverage line says how many.
//!
//! Also here: where KASAN keeps its shadow memory, which inline-instrumented code reads before
//! each access it checks.

use crate::symbols::{function_has_prefix, CodeRanges, Symbol};

/// Function name prefixes of the kernel's debugging facilities, compared with a symbol's name
/// without its compiler suffix (`lock_acquire.part.0`).
const DEBUGGING_PREFIXES: &[&str] = &[
    // KASAN, KFENCE, KCSAN, KMSAN, UBSAN: runtime checks and reports.
    "kasan_",
    "__kasan_",
    "__asan_",
    "kfence_",
    "__kfence_",
    "kcsan_",
    "__kcsan_",
    "__tsan_",
    "kmsan_",
    "__kmsan_",
    "__msan_",
    "ubsan_",
    "__ubsan_",
    // kmemleak.
    "kmemleak_",
    "__kmemleak_",
    // lockdep (PROVE_LOCKING) and the RCU lock checks it enables.
    "lockdep_",
    "__lockdep_",
    "lock_acquire",
    "lock_release",
    "lock_acquired",
    "lock_contended",
    "lock_is_held_type",
    "lock_sync",
    "lock_pin_lock",
    "lock_unpin_lock",
    "lock_repin_lock",
    "__lock_acquire",
    "__lock_release",
    "mark_lock",
    "mark_held_locks",
    "mark_usage",
    "validate_chain",
    "check_prev_add",
    "check_irq_usage",
    "check_noncircular",
    "lookup_chain_cache",
    "add_chain_cache",
    "hlock_class",
    "__bfs",
    "debug_lockdep_rcu_enabled",
    "rcu_read_lock_held",
    "rcu_read_lock_sched_held",
    "rcu_read_lock_bh_held",
    "rcu_read_lock_any_held",
    "debug_check_no_locks",
    // debugobjects.
    "debug_object",
    "__debug_object",
    "debug_check_no_obj_freed",
    "__debug_check_no_obj_freed",
    // Atomic-sleep checks (DEBUG_ATOMIC_SLEEP) and list checks (DEBUG_LIST).
    "__might_sleep",
    "__might_resched",
    "__might_fault",
    "__cant_sleep",
    "__cant_migrate",
    "__list_add_valid",
    "__list_del_entry_valid",
    // Where the facilities above keep the stacks they record.
    "stack_depot_",
    "__stack_depot_",
];

/// Stack walks: the debugging facilities' when one of them is in the kernel (lockdep, KASAN
/// and kmemleak record a stack per lock class, allocation or free), rare otherwise (a
/// `dump_stack`, a perf call chain), and then left to the workload.
const STACK_WALK_PREFIXES: &[&str] = &[
    "unwind_",
    "__unwind_",
    "arch_stack_walk",
    "stack_trace_save",
    "stack_trace_consume_entry",
    "orc_find",
    "__orc_find",
];

/// Functions that exist only in kernels built with a facility that walks a stack per event.
const STACK_RECORDING_FACILITIES: &[&str] = &["kasan_save_stack", "kmemleak_alloc", "lock_acquire"];

/// First byte of KASAN's shadow of the kernel half on x86-64 with 4-level paging
/// (`KASAN_SHADOW_START`, `Documentation/arch/x86/x86_64/mm.rst`: 16 TB from
/// `0xffffec0000000000`).
const KASAN_SHADOW_START: u64 = 0xffff_ec00_0000_0000;
/// End of KASAN's shadow (`KASAN_SHADOW_END`).
const KASAN_SHADOW_END: u64 = 0xffff_fc00_0000_0000;
/// Bytes of a kernel stack on x86-64 (`THREAD_SIZE`): 16 KiB, twice that with KASAN
/// (`KASAN_STACK_ORDER`), to which stacks are aligned.
const THREAD_SIZE: u64 = 16 * 1024;
const KASAN_THREAD_SIZE: u64 = 32 * 1024;

/// Whether `name` is a function of the kernel's debugging facilities (stack walks aside).
#[must_use]
pub fn is_debugging_function(name: &str) -> bool {
    function_has_prefix(name, DEBUGGING_PREFIXES)
}

fn is_stack_walk(name: &str) -> bool {
    function_has_prefix(name, STACK_WALK_PREFIXES)
}

/// The debugging code of one kernel, found in its code symbols.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebuggingCode {
    /// The debugging functions.
    ranges: CodeRanges,
    /// Whether the kernel has KASAN: its shadow memory is then a region of its own (without
    /// KASAN, memory randomisation may put other things at those addresses).
    kasan: bool,
}

impl DebuggingCode {
    /// The debugging functions among `text` (code symbols sorted by address, sizes set).
    #[must_use]
    pub fn from_text_symbols(text: &[Symbol]) -> Self {
        let walks_stacks = text
            .iter()
            .any(|s| STACK_RECORDING_FACILITIES.contains(&s.name.as_str()));
        let kasan = text.iter().any(|s| s.name == "kasan_check_range");
        let ranges = CodeRanges::of_functions(text, |s| {
            is_debugging_function(&s.name) || walks_stacks && is_stack_walk(&s.name)
        });
        Self { ranges, kasan }
    }

    /// Whether the kernel has no debugging code dprof knows of.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `ip` is in a debugging function.
    #[inline]
    #[must_use]
    pub fn contains(&self, ip: u64) -> bool {
        self.ranges.contains(ip)
    }

    /// Whether the kernel has KASAN.
    #[must_use]
    pub fn has_kasan(&self) -> bool {
        self.kasan
    }

    /// Bytes of this kernel's stacks, to which they are aligned.
    #[must_use]
    pub fn thread_size(&self) -> u64 {
        if self.kasan {
            KASAN_THREAD_SIZE
        } else {
            THREAD_SIZE
        }
    }

    /// Whether `addr` is KASAN's shadow memory, on a kernel with KASAN.
    #[inline]
    #[must_use]
    pub fn is_kasan_shadow(&self, addr: u64) -> bool {
        self.kasan && (KASAN_SHADOW_START..KASAN_SHADOW_END).contains(&addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Kallsyms;

    fn kallsyms(lines: &str) -> Kallsyms {
        Kallsyms::parse(lines.as_bytes())
    }

    #[test]
    fn sanitizer_and_lockdep_functions_are_debugging_code_and_others_are_not() {
        for name in [
            "kasan_check_range",
            "__asan_load8",
            "__asan_store4_noabort",
            "lock_acquire",
            "lock_acquire.part.0",
            "__lock_acquire",
            "validate_chain",
            "kmemleak_alloc",
            "__ubsan_handle_out_of_bounds",
            "debug_object_activate",
            "__might_sleep",
            "kfence_guarded_alloc",
            "stack_depot_save_flags",
        ] {
            assert!(is_debugging_function(name), "{name}");
        }
        for name in [
            "kmem_cache_alloc_noprof",
            "tcp_sendmsg",
            "_raw_spin_lock",
            "mutex_lock",
            "rcu_read_unlock_strict",
            "unwind_next_frame",
            "block_lock_acquire",
        ] {
            assert!(!is_debugging_function(name), "{name}");
        }
    }

    #[test]
    fn the_debugging_code_of_a_kernel_is_found_in_its_symbols() {
        let k = kallsyms(
            "ffffffff81000000 T tcp_sendmsg\n\
             ffffffff81000100 T lock_acquire\n\
             ffffffff81000200 t __lock_acquire\n\
             ffffffff81000300 T mutex_lock\n\
             ffffffff81000400 T unwind_next_frame\n\
             ffffffff81000500 T kasan_check_range\n\
             ffffffff81000600 T kfree\n",
        );
        let code = DebuggingCode::from_text_symbols(k.text_symbols());
        assert!(!code.is_empty());
        assert!(!code.contains(0xffff_ffff_8100_00ff));
        // lock_acquire and __lock_acquire, one range.
        assert!(code.contains(0xffff_ffff_8100_0100));
        assert!(code.contains(0xffff_ffff_8100_02ff));
        assert!(!code.contains(0xffff_ffff_8100_0300));
        // Lockdep and KASAN walk stacks: unwinding is theirs here.
        assert!(code.contains(0xffff_ffff_8100_0450));
        assert!(code.contains(0xffff_ffff_8100_0550));
        assert!(!code.contains(0xffff_ffff_8100_0600));
        assert!(code.has_kasan());
        assert_eq!(code.thread_size(), 32 * 1024);
        assert!(code.is_kasan_shadow(0xffff_ed10_0000_1234));
        assert!(!code.is_kasan_shadow(0xffff_8880_0000_1234));
    }

    #[test]
    fn a_kernel_without_debugging_facilities_keeps_its_stack_walks_and_shadow_addresses() {
        let k = kallsyms(
            "ffffffff81000000 T tcp_sendmsg\n\
             ffffffff81000400 T unwind_next_frame\n\
             ffffffff81000600 T kfree\n",
        );
        let code = DebuggingCode::from_text_symbols(k.text_symbols());
        assert!(code.is_empty());
        assert!(!code.contains(0xffff_ffff_8100_0450));
        assert_eq!(code.thread_size(), 16 * 1024);
        // Memory randomisation may put the direct map or vmalloc there without KASAN.
        assert!(!code.is_kasan_shadow(0xffff_ed10_0000_1234));
    }
}
