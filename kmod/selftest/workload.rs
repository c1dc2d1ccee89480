//! What every workload is built from: the clock, pacing, kernel threads pinned to CPUs, and
//! the access sequences that make TCG's samples land on the accesses.

use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;

extern "C" {
    fn ktime_get_mono_fast_ns() -> u64;
    fn dprof_selftest_shim_cond_resched();
    fn dprof_selftest_shim_pause_us(us: c_ulong);
    fn dprof_selftest_shim_sleep_exact_us(us: c_ulong);
    fn dprof_selftest_shim_run_threads(
        n: c_int,
        cpus: *const c_int,
        fns: *const unsafe extern "C" fn(*mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
}

/// One access followed by a jump that ends the translation block.
macro_rules! accesses {
    ($insn:literal) => {
        concat!($insn, "\n jmp 2f\n 2:\n")
    };
}

pub(crate) fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { ktime_get_mono_fast_ns() }
}

/// Sleeps about `us` µs. The workloads pace themselves with it: they are ground truth, not a
/// stress test, and the collector must keep up with the slab events they cause.
pub(crate) fn pause_us(us: u64) {
    // SAFETY: called from kernel threads in process context.
    unsafe { dprof_selftest_shim_pause_us(us as c_ulong) }
}

/// Sleeps `us` µs on a timer of its own (no slack). [`pause_us`]'s slack lets the wake-up
/// wait for a later timer in it, and the sampler's, every period, is one: a thread that
/// sleeps about a period and then runs for less than one was woken by each sample and asleep
/// again before the next, and was almost never sampled.
pub(crate) fn sleep_exact_us(us: u64) {
    // SAFETY: called from kernel threads in process context.
    unsafe { dprof_selftest_shim_sleep_exact_us(us as c_ulong) }
}

pub(crate) fn cond_resched() {
    // SAFETY: called from kernel threads in process context.
    unsafe { dprof_selftest_shim_cond_resched() }
}

/// Ends a TCG translation block right before a call to an access function. Under TCG a sample
/// lands on the first instruction of a block, weighted by how long the block before it ran:
/// without this, the function's entry (`endbr64`, no data access) would inherit the weight of
/// the caller's long block before the call.
pub(crate) fn block_boundary() {
    // SAFETY: a jump to the next instruction; touches no memory, registers or flags.
    unsafe { core::arch::asm!("jmp 2f", "2:", options(nomem, nostack, preserves_flags)) };
}

/// Runs `fns[i](arg)` on CPU `cpus[i]`, each in its own kernel thread, and waits for all.
pub(crate) fn run_threads<T>(
    arg: &T,
    cpus: &[c_int],
    fns: &[unsafe extern "C" fn(*mut c_void) -> c_int],
) -> Result {
    let arg = core::ptr::from_ref(arg).cast_mut().cast::<c_void>();
    // SAFETY: the shim waits for every thread before returning, so `arg` outlives them.
    let ret = unsafe {
        dprof_selftest_shim_run_threads(cpus.len() as c_int, cpus.as_ptr(), fns.as_ptr(), arg)
    };
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(())
    }
}
