// SPDX-License-Identifier: GPL-2.0

//! `ephemeral MS`: caches created and destroyed while dprof traces their objects. Round after
//! round, one thread on CPU 0 creates a cache (`dprof_selftest_eph_a`, 96-byte objects, in
//! even rounds; `dprof_selftest_eph_b`, 200-byte ones, in odd rounds), allocates and frees
//! [`OBJECTS`] objects of it, and destroys it. The next round's `kmem_cache` usually comes back
//! at the address the last one had, so a profiler that keeps naming caches by address must
//! notice the destruction.
//!
//! `ephemeral-hold 1` creates a `dprof_selftest_eph_a` ahead of a run, which the run's first eph_a
//! round then uses: a cache that exists when a collection starts, so that a history plan can
//! name it, and that is destroyed while the plan runs.
//!
//! `ephemeral_objects` in the debugfs directory reads the objects of each cache since load, as
//! `A B`, so that a test compares the profile with exact counts.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::workload::{cond_resched, now_ns, run_threads};

/// Objects allocated and freed per round.
const OBJECTS: c_int = 16;

extern "C" {
    /// Creates cache `b` (or `a`), allocates and frees `objects` objects, destroys it:
    /// objects allocated (all freed), or a negative errno.
    fn dprof_selftest_shim_ephemeral_round(b: bool, objects: c_int) -> c_int;
    /// Creates the `dprof_selftest_eph_a` the next eph_a round uses: 0, or a negative errno
    /// (EBUSY when one is held already).
    fn dprof_selftest_shim_ephemeral_hold() -> c_int;
}

/// Objects of `dprof_selftest_eph_a` and `_b` allocated (and freed) since load.
static OBJECTS_A: AtomicU64 = AtomicU64::new(0);
static OBJECTS_B: AtomicU64 = AtomicU64::new(0);

/// `ephemeral_objects`: the two counts.
#[no_mangle]
extern "C" fn dprof_selftest_rs_ephemeral_objects(a: *mut u64, b: *mut u64) {
    // SAFETY: the shim passes two live u64s.
    unsafe {
        *a = OBJECTS_A.load(Ordering::Relaxed);
        *b = OBJECTS_B.load(Ordering::Relaxed);
    }
}

/// The thread of `ephemeral`.
///
/// # Safety
/// `arg` must be the run's deadline (a `u64` in ns), alive until the thread is done.
unsafe extern "C" fn ephemeral_worker(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the deadline, alive until all threads of the run are done.
    let deadline_ns = unsafe { *arg.cast::<u64>() };
    let mut round = 0u64;
    while now_ns() < deadline_ns {
        let b = round % 2 == 1;
        // SAFETY: process context.
        let n = unsafe { dprof_selftest_shim_ephemeral_round(b, OBJECTS) };
        if n < 0 {
            return n;
        }
        let count = if b { &OBJECTS_B } else { &OBJECTS_A };
        count.fetch_add(n as u64, Ordering::Relaxed);
        round += 1;
        cond_resched();
    }
    0
}

pub(crate) fn ephemeral(ms: u64) -> Result {
    let deadline_ns = now_ns() + ms * 1_000_000;
    run_threads(&deadline_ns, &[0], &[ephemeral_worker])
}

/// The thread of `ephemeral-hold`: on CPU 0, as the rounds are, so that SLUB usually hands the
/// held cache's `kmem_cache`, freed by the first round, to the next round's cache.
///
/// # Safety
/// Process context; the argument is not used.
unsafe extern "C" fn hold_worker(_arg: *mut c_void) -> c_int {
    // SAFETY: process context.
    unsafe { dprof_selftest_shim_ephemeral_hold() }
}

/// `ephemeral-hold`: see the module's documentation.
pub(crate) fn hold() -> Result {
    run_threads(&(), &[0], &[hold_worker])
}
