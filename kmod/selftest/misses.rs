// SPDX-License-Identifier: GPL-2.0

//! Workloads whose cache misses have one known cause each, for the miss classification and
//! working set views. Each type has a dedicated cache named like its struct (selftest.h).
//!
//! - `falseshare MS`: a thread on CPU 0 writes `left` (offset 0, in
//!   `dprof_selftest_write_left`) and a thread on CPU 1 writes `right` (offset 32, in
//!   `dprof_selftest_write_right`) of one `dprof_selftest_pair`, taking turns, so that every
//!   write follows a write from the other CPU to other bytes of the same line.
//! - `trueshare MS`: a mailbox. CPU 0 posts a number into `value` of a `dprof_selftest_shared`
//!   (`dprof_selftest_share_write`); CPU 1 takes it, reading and emptying `value` in one
//!   read-modify-write (`dprof_selftest_share_read`). Every access follows a write from the
//!   other CPU to the same bytes. (With a plain load on CPU 1 the posting stores would follow
//!   no remote write, so half the accesses would not be sharing misses at all.)
//! - `conflict MS`: 256 `dprof_selftest_stride` objects of 64 bytes in a cache aligned to a
//!   page, so every object starts a page and their lines fall in the associativity sets whose
//!   index is a multiple of PAGE_SIZE / 64; CPU 0 reads `key` (offset 0) of each in turn,
//!   over and over (`dprof_selftest_stride_touch`). 16 KiB of data, far less than any cache: only the
//!   placement makes it miss.
//! - `capacity MS`: CPU 0 allocates 49152 `dprof_selftest_sweep` objects of 1 KiB (48 MiB,
//!   three times a 16 MiB last-level cache) in 16 steps over the first 30% of the run, reads
//!   every line of every live object in turn (`dprof_selftest_sweep_touch`) all along, and
//!   frees them in 16 steps over the last 30%, so that the live count changes over time.
//!
//! In the sharing workloads each object lives for one round of [`TURNS`] accesses per CPU
//! (a few milliseconds), so that many objects are allocated while dprof collects: histories
//! start at allocation and must end (free) within their timeout and hit limit. The turns go
//! through a counter on the control file writer's stack, never through the object.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use kernel::alloc::KVVec;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::workload::{block_boundary, cond_resched, now_ns, pause_us, run_threads};

/// Mirrors `struct dprof_selftest_pair` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestPair {
    left: u64,
    pad0: [u64; 3],
    right: u64,
    pad1: [u64; 3],
}

assert_c_layout!(SelftestPair, size 64, { left: 0, pad0: 8, right: 32, pad1: 40 });

/// Mirrors `struct dprof_selftest_shared` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestShared {
    value: u64,
    pad: [u64; 7],
}

assert_c_layout!(SelftestShared, size 64, { value: 0, pad: 8 });

/// Mirrors `struct dprof_selftest_stride` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestStride {
    key: u64,
    pad: [u64; 7],
}

assert_c_layout!(SelftestStride, size 64, { key: 0, pad: 8 });

/// Mirrors `struct dprof_selftest_sweep` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestSweep {
    line: [[u64; 8]; 16],
}

assert_c_layout!(SelftestSweep, size 1024, { line: 0 });

extern "C" {
    fn dprof_selftest_shim_alloc_pair() -> *mut SelftestPair;
    fn dprof_selftest_shim_free_pair(obj: *mut SelftestPair);
    fn dprof_selftest_shim_alloc_shared() -> *mut SelftestShared;
    fn dprof_selftest_shim_free_shared(obj: *mut SelftestShared);
    fn dprof_selftest_shim_alloc_stride() -> *mut SelftestStride;
    fn dprof_selftest_shim_free_stride(obj: *mut SelftestStride);
    fn dprof_selftest_shim_alloc_sweep() -> *mut SelftestSweep;
    fn dprof_selftest_shim_free_sweep(obj: *mut SelftestSweep);
}

// The access functions and their loops, in a page-aligned section of their own (see the
// comment on `.text.dprof_selftest_main` in selftest_main.rs).
core::arch::global_asm!(
    ".pushsection .text.dprof_selftest_misses, \"ax\", @progbits",
    ".balign 4096",
    ".popsection",
);

// Each access function's assembly starts with a comment naming it: without it, LLVM would
// merge functions whose code is identical (`dprof_selftest_write_left` and
// `dprof_selftest_share_write`) into one symbol, and samples would name the wrong one.

/// Writes `obj.left` (offset 0) once.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_write_left(obj: *mut SelftestPair, value: u64) {
    // SAFETY: `obj` is a live pair of this round; the store stays inside it. The leading jump
    // makes the store start a TCG translation block, where samples land.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_write_left", "jmp 2f", "2:",
            accesses!("mov qword ptr [{obj}], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// Writes `obj.right` (offset 32) once.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_write_right(obj: *mut SelftestPair, value: u64) {
    // SAFETY: as for `dprof_selftest_write_left`.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_write_right", "jmp 2f", "2:",
            accesses!("mov qword ptr [{obj} + 32], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// Posts `value` into the mailbox `obj.value` (offset 0).
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_share_write(obj: *mut SelftestShared, value: u64) {
    // SAFETY: `obj` is a live mailbox of this round; the store stays inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_share_write", "jmp 2f", "2:",
            accesses!("mov qword ptr [{obj}], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// Takes the number `expected` out of the mailbox `obj.value`: reads it and leaves 0, in one
/// read-modify-write (`cmpxchg`, which writes its destination whether or not it matched).
/// Returns what the mailbox held.
///
/// Not `xchg` nor `lock cmpxchg`: QEMU's TCG runs locked instructions on a watched page
/// apart from everything else (stop-the-world, measured ~15 ms each), with neither the
/// watchpoint trap nor the sample; the turns already keep the two CPUs apart.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_share_read(obj: *mut SelftestShared, expected: u64) -> u64 {
    let mut held = expected;
    // SAFETY: `obj` is a live mailbox of this round; the exchange stays inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_share_read", "jmp 2f", "2:",
            accesses!("cmpxchg qword ptr [{obj}], {empty}"),
            obj = in(reg) obj,
            empty = in(reg) 0u64,
            inout("rax") held,
            options(nostack),
        );
    }
    held
}

/// Reads `key` (offset 0) of four objects, one after the other; returns the sum of the keys.
///
/// Four per call, not one: under QEMU's TCG a sample lands on the instruction after the
/// one it interrupted, and each load here is the slow one (every object is on its own page,
/// so each misses QEMU's own TLB). With several loads in a row, most samples land on the next
/// object's load instead of on the return.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_stride_touch(
    a: *const SelftestStride,
    b: *const SelftestStride,
    c: *const SelftestStride,
    d: *const SelftestStride,
) -> u64 {
    let (ka, kb, kc, kd): (u64, u64, u64, u64);
    // SAFETY: the four are live objects of the conflict workload; the loads stay inside them.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_stride_touch", "jmp 2f", "2:",
            accesses!("mov {ka}, qword ptr [{a}]"), accesses!("mov {kb}, qword ptr [{b}]"),
            accesses!("mov {kc}, qword ptr [{c}]"), accesses!("mov {kd}, qword ptr [{d}]"),
            a = in(reg) a,
            b = in(reg) b,
            c = in(reg) c,
            d = in(reg) d,
            ka = out(reg) ka,
            kb = out(reg) kb,
            kc = out(reg) kc,
            kd = out(reg) kd,
            options(nostack, readonly),
        );
    }
    ka.wrapping_add(kb).wrapping_add(kc).wrapping_add(kd)
}

/// Reads the first word of each of the 16 lines of `obj`, in order; returns their sum.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
pub(crate) extern "C" fn dprof_selftest_sweep_touch(obj: *const SelftestSweep) -> u64 {
    let (a, b): (u64, u64);
    // SAFETY: `obj` is a live object of the capacity workload; the loads stay inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_sweep_touch", "jmp 2f", "2:",
            accesses!("mov {a}, qword ptr [{obj}]"), accesses!("mov {b}, qword ptr [{obj} + 64]"),
            accesses!("mov {a}, qword ptr [{obj} + 128]"), accesses!("mov {b}, qword ptr [{obj} + 192]"),
            accesses!("mov {a}, qword ptr [{obj} + 256]"), accesses!("mov {b}, qword ptr [{obj} + 320]"),
            accesses!("mov {a}, qword ptr [{obj} + 384]"), accesses!("mov {b}, qword ptr [{obj} + 448]"),
            accesses!("mov {a}, qword ptr [{obj} + 512]"), accesses!("mov {b}, qword ptr [{obj} + 576]"),
            accesses!("mov {a}, qword ptr [{obj} + 640]"), accesses!("mov {b}, qword ptr [{obj} + 704]"),
            accesses!("mov {a}, qword ptr [{obj} + 768]"), accesses!("mov {b}, qword ptr [{obj} + 832]"),
            accesses!("mov {a}, qword ptr [{obj} + 896]"), accesses!("mov {b}, qword ptr [{obj} + 960]"),
            obj = in(reg) obj,
            a = out(reg) a,
            b = out(reg) b,
            options(nostack, readonly),
        );
    }
    a.wrapping_add(b)
}

/// Accesses per CPU in one round of a sharing workload: 2 * TURNS hits per history, well
/// under the 4096 a history records by default, and short rounds, so many objects.
const TURNS: u64 = 32;

/// Spins before a waiting thread sleeps. Short: under TCG both vCPUs are host threads, and
/// on a busy host a spinning vCPU takes the time its partner needs to take its turn.
const SPINS_BEFORE_SLEEP: u32 = 64;

/// How long a thread waits for its partner past the deadline before giving up (a partner
/// that never started).
const PARTNER_GRACE_NS: u64 = 2_000_000_000;

/// A sharing workload: per round, CPU 0 allocates an object, both CPUs access it in turns
/// ([`TURNS`] each, CPU 0 first), CPU 0 frees it.
struct PingPong {
    deadline_ns: u64,
    alloc: fn() -> *mut c_void,
    free: fn(*mut c_void),
    /// CPU 0's access in turn `i` of a round.
    first: fn(*mut c_void, u64),
    /// CPU 1's access in turn `i`; false when the object did not hold what CPU 0 left there.
    second: fn(*mut c_void, u64) -> bool,
    /// The object of the current round.
    object: AtomicPtr<c_void>,
    /// Rounds published by CPU 0.
    round: AtomicU64,
    /// Accesses done in the current round: CPU 0 acts when it is even, CPU 1 when odd.
    turn: AtomicU64,
    /// CPU 0 publishes no more rounds.
    done: AtomicBool,
    /// A thread gave up waiting, or CPU 1 found the object wrong: the run fails.
    failed: AtomicBool,
}

impl PingPong {
    fn new(
        ms: u64,
        alloc: fn() -> *mut c_void,
        free: fn(*mut c_void),
        first: fn(*mut c_void, u64),
        second: fn(*mut c_void, u64) -> bool,
    ) -> Self {
        Self {
            deadline_ns: now_ns() + ms * 1_000_000,
            alloc,
            free,
            first,
            second,
            object: AtomicPtr::new(core::ptr::null_mut()),
            round: AtomicU64::new(0),
            turn: AtomicU64::new(0),
            done: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }

    /// Waits until `ready` holds: spins a little, then sleeps in short steps. False when the
    /// partner is long overdue or failed.
    fn wait(&self, ready: impl Fn() -> bool) -> bool {
        let mut spins = 0u32;
        while !ready() {
            if spins < SPINS_BEFORE_SLEEP {
                core::hint::spin_loop();
                spins += 1;
                continue;
            }
            if self.failed.load(Ordering::Relaxed) || now_ns() > self.deadline_ns + PARTNER_GRACE_NS
            {
                self.failed.store(true, Ordering::Relaxed);
                return false;
            }
            pause_us(10);
        }
        true
    }

    fn run(&self) -> Result {
        let result = run_threads(self, &[0, 1], &[pingpong_first, pingpong_second]);
        if result.is_ok() && self.failed.load(Ordering::Relaxed) {
            return Err(EIO);
        }
        result
    }
}

/// The first thread of a ping-pong run.
///
/// # Safety
/// `arg` must be the run's [`PingPong`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_misses"]
unsafe extern "C" fn pingpong_first(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the PingPong of this run, alive until all its threads are done.
    let pp = unsafe { &*arg.cast::<PingPong>() };
    let mut round = 0u64;
    while now_ns() < pp.deadline_ns && !pp.failed.load(Ordering::Relaxed) {
        let obj = (pp.alloc)();
        if obj.is_null() {
            cond_resched();
            continue;
        }
        round += 1;
        pp.turn.store(0, Ordering::Relaxed);
        pp.object.store(obj, Ordering::Relaxed);
        pp.round.store(round, Ordering::Release);
        let mut finished = true;
        for i in 0..TURNS {
            if !pp.wait(|| pp.turn.load(Ordering::Acquire) == 2 * i) {
                finished = false;
                break;
            }
            block_boundary();
            (pp.first)(obj, i + 1);
            pp.turn.store(2 * i + 1, Ordering::Release);
        }
        // CPU 1's last access, then the object is CPU 0's again.
        if finished {
            pp.wait(|| pp.turn.load(Ordering::Acquire) == 2 * TURNS);
        }
        if !finished || pp.turn.load(Ordering::Acquire) != 2 * TURNS {
            // CPU 1 may still hold the pointer: leak the object rather than free it under it.
            break;
        }
        (pp.free)(obj);
        // Paced: the collector must keep up with the samples and the histories.
        pause_us(200);
    }
    pp.done.store(true, Ordering::Release);
    0
}

/// The second thread of a ping-pong run.
///
/// # Safety
/// `arg` must be the run's [`PingPong`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_misses"]
unsafe extern "C" fn pingpong_second(arg: *mut c_void) -> c_int {
    // SAFETY: as for the first.
    let pp = unsafe { &*arg.cast::<PingPong>() };
    let mut seen = 0u64;
    loop {
        let next = || pp.round.load(Ordering::Acquire) != seen || pp.done.load(Ordering::Acquire);
        if !pp.wait(next) {
            break;
        }
        let round = pp.round.load(Ordering::Acquire);
        if round == seen {
            break; // done, no new round
        }
        seen = round;
        let obj = pp.object.load(Ordering::Relaxed);
        for i in 0..TURNS {
            if !pp.wait(|| pp.turn.load(Ordering::Acquire) == 2 * i + 1) {
                return 0;
            }
            block_boundary();
            if !(pp.second)(obj, i + 1) {
                pp.failed.store(true, Ordering::Relaxed);
            }
            pp.turn.store(2 * i + 2, Ordering::Release);
        }
    }
    0
}

fn pair_alloc() -> *mut c_void {
    // SAFETY: process context.
    unsafe { dprof_selftest_shim_alloc_pair() }.cast()
}

fn pair_free(obj: *mut c_void) {
    // SAFETY: a pair allocated by `pair_alloc`, freed once, no longer accessed.
    unsafe { dprof_selftest_shim_free_pair(obj.cast()) }
}

#[link_section = ".text.dprof_selftest_misses"]
fn pair_left(obj: *mut c_void, i: u64) {
    dprof_selftest_write_left(obj.cast(), i);
}

#[link_section = ".text.dprof_selftest_misses"]
fn pair_right(obj: *mut c_void, i: u64) -> bool {
    dprof_selftest_write_right(obj.cast(), i);
    true
}

fn shared_alloc() -> *mut c_void {
    // SAFETY: process context.
    unsafe { dprof_selftest_shim_alloc_shared() }.cast()
}

fn shared_free(obj: *mut c_void) {
    // SAFETY: a mailbox allocated by `shared_alloc`, freed once, no longer accessed.
    unsafe { dprof_selftest_shim_free_shared(obj.cast()) }
}

#[link_section = ".text.dprof_selftest_misses"]
fn shared_post(obj: *mut c_void, i: u64) {
    dprof_selftest_share_write(obj.cast(), i);
}

/// Takes the mailbox's number: CPU 0 posted `i` in this turn.
#[link_section = ".text.dprof_selftest_misses"]
fn shared_take(obj: *mut c_void, i: u64) -> bool {
    dprof_selftest_share_read(obj.cast(), i) == i
}

/// `falseshare MS`.
pub(crate) fn falseshare(ms: u64) -> Result {
    PingPong::new(ms, pair_alloc, pair_free, pair_left, pair_right).run()
}

/// `trueshare MS`.
pub(crate) fn trueshare(ms: u64) -> Result {
    PingPong::new(ms, shared_alloc, shared_free, shared_post, shared_take).run()
}

/// Objects of the conflict workload: 256 lines in 8 sets of a 512-set cache, 32 per set.
const STRIDE_OBJECTS: usize = 256;
// `dprof_selftest_stride_touch` takes four at a time.
const _: () = assert!(STRIDE_OBJECTS % 4 == 0);

/// Objects of the capacity workload: 48 MiB of 1 KiB objects.
const SWEEP_OBJECTS: usize = 49152;

/// Allocation (and free) steps of the capacity workload.
const SWEEP_STEPS: usize = 16;

/// A run of the single-threaded workloads on CPU 0.
struct Solo {
    deadline_ns: u64,
    ms: u64,
    result: AtomicU64,
}

/// Errno a solo workload returns through [`Solo::result`] (0: success).
fn solo_result(solo: &Solo) -> Result {
    match solo.result.load(Ordering::Relaxed) {
        0 => Ok(()),
        e => Err(Error::from_errno(-(e as c_int))),
    }
}

/// The thread of `conflict`.
///
/// # Safety
/// `arg` must be the run's [`Solo`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_misses"]
unsafe extern "C" fn conflict_worker(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Solo of this run, alive until its thread is done.
    let solo = unsafe { &*arg.cast::<Solo>() };
    let mut objects = [core::ptr::null_mut::<SelftestStride>(); STRIDE_OBJECTS];
    let mut allocated = 0;
    for (i, slot) in objects.iter_mut().enumerate() {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_stride() };
        if obj.is_null() {
            break;
        }
        // SAFETY: freshly allocated, owned here.
        unsafe { (*obj).key = i as u64 };
        *slot = obj;
        allocated += 1;
    }
    if allocated == STRIDE_OBJECTS {
        let mut sum = 0u64;
        while now_ns() < solo.deadline_ns {
            for (i, four) in objects.chunks_exact(4).enumerate() {
                block_boundary();
                sum = sum.wrapping_add(dprof_selftest_stride_touch(
                    four[0], four[1], four[2], four[3],
                ));
                if i % 16 == 15 {
                    cond_resched();
                }
            }
        }
        // Each pass adds 0 + 1 + ... + 255: a wrong object read would show.
        let per_pass = (STRIDE_OBJECTS * (STRIDE_OBJECTS - 1) / 2) as u64;
        if per_pass == 0 || sum % per_pass != 0 {
            solo.result
                .store(EIO.to_errno().unsigned_abs().into(), Ordering::Relaxed);
        }
    } else {
        solo.result
            .store(ENOMEM.to_errno().unsigned_abs().into(), Ordering::Relaxed);
    }
    for &obj in &objects[..allocated] {
        // SAFETY: allocated above, freed once.
        unsafe { dprof_selftest_shim_free_stride(obj) };
    }
    0
}

/// Reads every line of every object of `objects`, then lets others run.
#[inline(never)]
#[link_section = ".text.dprof_selftest_misses"]
fn sweep(objects: &[*mut SelftestSweep]) {
    for (i, &obj) in objects.iter().enumerate() {
        block_boundary();
        dprof_selftest_sweep_touch(obj);
        if i % 64 == 63 {
            cond_resched();
        }
    }
}

/// Sweeps `objects` at least once and until `until_ns`.
fn sweep_until(objects: &[*mut SelftestSweep], until_ns: u64) {
    loop {
        sweep(objects);
        if now_ns() >= until_ns {
            break;
        }
    }
}

/// The capacity workload's timeline; returns how many of `objects`, from the start, are
/// still allocated (the caller frees them).
fn capacity_run(solo: &Solo, objects: &mut KVVec<*mut SelftestSweep>) -> (usize, Result) {
    let start = now_ns();
    let span = solo.ms * 1_000_000 * 3 / 10;
    let per_step = SWEEP_OBJECTS / SWEEP_STEPS;
    // Grow over the first 30%.
    for step in 0..SWEEP_STEPS {
        for _ in 0..per_step {
            // SAFETY: process context.
            let obj = unsafe { dprof_selftest_shim_alloc_sweep() };
            if obj.is_null() {
                return (objects.len(), Err(ENOMEM));
            }
            if let Err(e) = objects.push(obj, GFP_KERNEL) {
                // SAFETY: allocated above and never published: freed once.
                unsafe { dprof_selftest_shim_free_sweep(obj) };
                return (objects.len(), Err(e.into()));
            }
            if objects.len() % 256 == 0 {
                cond_resched();
            }
        }
        sweep_until(
            objects,
            start + span * (step as u64 + 1) / SWEEP_STEPS as u64,
        );
    }
    // All of it until 70%.
    let shrink_start = solo.deadline_ns - span;
    sweep_until(objects, shrink_start);
    // Shrink over the last 30%, the latest allocated first.
    let mut live = objects.len();
    for step in 0..SWEEP_STEPS {
        let keep = live.saturating_sub(per_step);
        for &obj in &objects[keep..live] {
            // SAFETY: allocated by this run, freed once (`live` moves below it).
            unsafe { dprof_selftest_shim_free_sweep(obj) };
        }
        live = keep;
        cond_resched();
        if live > 0 {
            sweep_until(
                &objects[..live],
                shrink_start + span * (step as u64 + 1) / SWEEP_STEPS as u64,
            );
        }
    }
    (live, Ok(()))
}

/// The thread of `capacity`.
///
/// # Safety
/// `arg` must be the run's [`Solo`], alive until the thread is done.
unsafe extern "C" fn capacity_worker(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Solo of this run, alive until its thread is done.
    let solo = unsafe { &*arg.cast::<Solo>() };
    let result = match KVVec::with_capacity(SWEEP_OBJECTS, GFP_KERNEL) {
        Ok(mut objects) => {
            let (live, result) = capacity_run(solo, &mut objects);
            for &obj in &objects[..live] {
                // SAFETY: allocated by this run and not freed by it yet.
                unsafe { dprof_selftest_shim_free_sweep(obj) };
            }
            result
        }
        Err(_) => Err(ENOMEM),
    };
    if let Err(e) = result {
        solo.result
            .store(e.to_errno().unsigned_abs().into(), Ordering::Relaxed);
    }
    0
}

fn solo_run(ms: u64, worker: unsafe extern "C" fn(*mut c_void) -> c_int) -> Result {
    let solo = Solo {
        deadline_ns: now_ns() + ms * 1_000_000,
        ms,
        result: AtomicU64::new(0),
    };
    run_threads(&solo, &[0], &[worker])?;
    solo_result(&solo)
}

/// `conflict MS`.
pub(crate) fn conflict(ms: u64) -> Result {
    solo_run(ms, conflict_worker)
}

/// `capacity MS`.
pub(crate) fn capacity(ms: u64) -> Result {
    solo_run(ms, capacity_worker)
}
