// SPDX-License-Identifier: GPL-2.0

//! `bulk MS`: slab objects allocated and freed in bulk, which fires no kmem tracepoint (NAPI
//! takes its sk_buffs this way). One thread on CPU 0, round after round:
//!
//! - allocates [`BATCH`] `dprof_selftest_bulk` objects with `kmem_cache_alloc_bulk`, writes
//!   `value` (offset 8) of each in `dprof_selftest_bulk_touch`, and frees them with
//!   `kmem_cache_free_bulk`;
//! - every fourth round, also allocates [`KMALLOC_BATCH`] `kmalloc(64)` objects one by one
//!   (traced) and frees them with `kfree_bulk`, which names no cache.
//!
//! `bulk_objects` in the debugfs directory reads the objects of each kind since load, as
//! `BULK KFREE_BULK`, so that a test compares the profile with exact counts.

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::workload::{block_boundary, cond_resched, now_ns, pause_us, run_threads};

/// Mirrors `struct dprof_selftest_bulk` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestBulk {
    id: u64,
    value: u64,
    pad: [u64; 6],
}

assert_c_layout!(SelftestBulk, size 64, { id: 0, value: 8, pad: 16 });

/// Objects per bulk allocation.
const BATCH: usize = 16;
/// kmalloc objects per `kfree_bulk`.
const KMALLOC_BATCH: usize = 4;

extern "C" {
    fn dprof_selftest_shim_alloc_bulk(objects: *mut *mut SelftestBulk, n: usize) -> c_int;
    fn dprof_selftest_shim_free_bulk(objects: *mut *mut SelftestBulk, n: usize);
    fn dprof_selftest_shim_kmalloc_64(objects: *mut *mut c_void, n: usize) -> c_int;
    fn dprof_selftest_shim_kfree_bulk(objects: *mut *mut c_void, n: usize);
}

/// Objects allocated and freed in bulk since load.
static BULK_OBJECTS: AtomicU64 = AtomicU64::new(0);
/// kmalloc objects freed by `kfree_bulk` since load.
static KFREE_BULK_OBJECTS: AtomicU64 = AtomicU64::new(0);

/// `bulk_objects`: the two counts.
#[no_mangle]
extern "C" fn dprof_selftest_rs_bulk_objects(bulk: *mut u64, kfree_bulk: *mut u64) {
    // SAFETY: the shim passes two live u64s.
    unsafe {
        *bulk = BULK_OBJECTS.load(Ordering::Relaxed);
        *kfree_bulk = KFREE_BULK_OBJECTS.load(Ordering::Relaxed);
    }
}

// The access function and its loop, in a page-aligned section of their own (see the comment
// on `.text.dprof_selftest_main` in selftest_main.rs).
core::arch::global_asm!(
    ".pushsection .text.dprof_selftest_bulk, \"ax\", @progbits",
    ".balign 4096",
    ".popsection",
);

/// Writes `obj.value` (offset 8) 8 times.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_bulk"]
pub(crate) extern "C" fn dprof_selftest_bulk_touch(obj: *mut SelftestBulk, value: u64) {
    // SAFETY: `obj` is a live object of the caller's batch; the stores stay inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_bulk_touch", "jmp 2f", "2:",
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// The thread of `bulk`.
///
/// # Safety
/// `arg` must be the run's deadline (a `u64` in ns), alive until the thread is done.
#[link_section = ".text.dprof_selftest_bulk"]
unsafe extern "C" fn bulk_worker(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the deadline, alive until all threads of the run are done.
    let deadline_ns = unsafe { *arg.cast::<u64>() };
    let mut round = 0u64;
    while now_ns() < deadline_ns {
        let mut objects = [core::ptr::null_mut::<SelftestBulk>(); BATCH];
        // SAFETY: process context; `objects` has room for BATCH pointers.
        let n = unsafe { dprof_selftest_shim_alloc_bulk(objects.as_mut_ptr(), BATCH) };
        let n = usize::try_from(n).unwrap_or(0).min(BATCH);
        for &obj in &objects[..n] {
            block_boundary();
            dprof_selftest_bulk_touch(obj, round);
        }
        // SAFETY: the `n` objects just allocated, each freed once.
        unsafe { dprof_selftest_shim_free_bulk(objects.as_mut_ptr(), n) };
        BULK_OBJECTS.fetch_add(n as u64, Ordering::Relaxed);
        if round % 4 == 0 {
            let mut small = [core::ptr::null_mut::<c_void>(); KMALLOC_BATCH];
            // SAFETY: process context; `small` has room for KMALLOC_BATCH pointers.
            let got = unsafe { dprof_selftest_shim_kmalloc_64(small.as_mut_ptr(), KMALLOC_BATCH) };
            let got = usize::try_from(got).unwrap_or(0).min(KMALLOC_BATCH);
            // SAFETY: the `got` objects just allocated, each freed once.
            unsafe { dprof_selftest_shim_kfree_bulk(small.as_mut_ptr(), got) };
            KFREE_BULK_OBJECTS.fetch_add(got as u64, Ordering::Relaxed);
        }
        round += 1;
        if round % 8 == 0 {
            pause_us(200);
        } else {
            cond_resched();
        }
    }
    0
}

pub(crate) fn bulk(ms: u64) -> Result {
    let deadline_ns = now_ns() + ms * 1_000_000;
    run_threads(&deadline_ns, &[0], &[bulk_worker])
}
