// SPDX-License-Identifier: GPL-2.0

//! dprof_selftest.ko: kernel workloads whose answers are known, the ground truth of dprof's
//! tests.
//!
//! Control: write a command to `/sys/kernel/debug/dprof_selftest/run`; the write returns when
//! the workload is over.
//!
//! - `handoff MS [P C]`: for MS milliseconds a producer thread on CPU 0 (or P) allocates
//!   `dprof_selftest_obj` objects, writes field `a` (in `dprof_selftest_produce`) and queues
//!   them to a consumer thread on CPU 1 (or C), which reads `a` and `b` (in
//!   `dprof_selftest_consume`) and frees them. Every object crosses CPUs: the type bounces.
//! - `local MS`: one thread on CPU 0 allocates `dprof_selftest_local` objects, touches `count`
//!   and `value` (in `dprof_selftest_local_touch`) and frees them. It never bounces.
//!
//! - `falseshare MS`, `trueshare MS`, `conflict MS`, `capacity MS`: one known cause of cache
//!   misses each, for the miss classification and working set views (misses.rs).
//! - `causal MS`: rounds of a chain on CPU 0, which accesses `dprof_selftest_causal_x` for
//!   about 20% of each round and computes for the rest, and a worker on CPU 1, which accesses
//!   `dprof_selftest_causal_y` for about 55% and then waits: Y has more samples, X is on the
//!   critical path. After each round the chain calls the progress point
//!   `dprof_selftest_causal_round`; `causal_rounds` in the same debugfs directory reads the
//!   rounds done since load. For causal experiments (causal.rs). `causal-rounds N [X Y]`: the
//!   same, N rounds, however long they take (end-to-end experiments time whole runs), with X
//!   calls of the X accesses per step and Y calls of the Y accesses per round if given.
//! - `causal-blocking MS`: the same two types, where the thread that makes progress sleeps on
//!   a timer each round: a spinner on CPU 0 accesses X for half its time and never waits for
//!   anyone; a sleeper on CPU 1 sleeps about 1 ms, accesses Y, and calls the progress point
//!   `dprof_selftest_causal_blocking_round`. X is off the path, Y on it. The ground truth of
//!   per-task delay accounting (causal_blocking.rs). `causal-wakeup MS`: the same threads,
//!   where the one on CPU 1 is woken by the one on CPU 0 after each of its rounds, through
//!   `dprof_selftest_causal_wakeup_round`: X is on the path.
//! - `causal-arrival MS [GAP_US]`: the same two types in an open loop: a generator on CPU 0
//!   makes a request arrive every GAP_US (1000 unless given; the arrival point
//!   `dprof_selftest_causal_arrive`) and a server on CPU 1 serves each with X and Y
//!   accesses, then calls the progress point `dprof_selftest_causal_depart`. The server is
//!   busy part of the time, so X matters to throughput only under amplified load
//!   (causal_arrival.rs), the ground truth of `--arrival-speedup`.
//! - `relay MS`: `dprof_selftest_relay` objects go CPU 0 → CPU 1 → CPU 0 with a fixed sequence
//!   of field reads and writes, the ground truth of whole-object histories (relay.rs).
//! - `bulk MS`: `dprof_selftest_bulk` objects allocated and freed in bulk, and kmalloc objects
//!   freed with `kfree_bulk`: slab events without tracepoints (bulk.rs); `bulk_objects` in
//!   the same debugfs directory reads how many of each since load.
//! - `ephemeral MS`: caches created, used and destroyed round after round, the next one
//!   usually at the last one's address (ephemeral.rs); `ephemeral_objects` reads how many
//!   objects of each since load. `ephemeral-hold 1` creates the first one ahead of a run.
//!
//! New workloads are new commands beside these.
//!
//! The access functions are straight-line inline assembly, so which instruction touches which
//! field is known exactly. Each access is followed by a jump: QEMU's TCG takes interrupts only
//! at the start of a translation block, so this makes the sampled ip land on the accesses
//! themselves in the test guest (on hardware the jumps cost next to nothing).

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;

// First: their macros serve the modules declared after them.
#[macro_use]
#[path = "../layout.rs"]
mod layout;
#[macro_use]
mod workload;

mod bulk;
mod causal;
mod causal_arrival;
mod causal_blocking;
mod ephemeral;
mod misses;
mod relay;

use workload::{block_boundary, cond_resched, now_ns, pause_us, run_threads};

module! {
    type: Selftest,
    name: "dprof_selftest",
    author: "dprof developers",
    description: "dprof: workloads with known answers for testing the profiler",
    license: "GPL",
}

/// Mirrors `struct dprof_selftest_obj` (selftest.h).
#[repr(C)]
pub struct SelftestObj {
    seq: u64,
    a: u64,
    b: u64,
    pad: [u64; 5],
}

assert_c_layout!(SelftestObj, size 64, { seq: 0, a: 8, b: 16, pad: 24 });

/// Mirrors `struct dprof_selftest_local` (selftest.h).
#[repr(C)]
pub struct SelftestLocal {
    count: u64,
    value: u64,
    pad: [u64; 6],
}

assert_c_layout!(SelftestLocal, size 64, { count: 0, value: 8, pad: 16 });

extern "C" {
    fn dprof_selftest_shim_init() -> c_int;
    fn dprof_selftest_shim_exit();
    fn dprof_selftest_shim_alloc_obj() -> *mut SelftestObj;
    fn dprof_selftest_shim_free_obj(obj: *mut SelftestObj);
    fn dprof_selftest_shim_alloc_local() -> *mut SelftestLocal;
    fn dprof_selftest_shim_free_local(obj: *mut SelftestLocal);
}

// The access functions and the loops that call them live in a section of their own, aligned
// to a page (one per file of workloads: `.text.dprof_selftest_NAME`). Under TCG a page
// boundary inside an access function, or between a loop and the access function it calls,
// ends translation blocks in ways that move samples off the accesses: with the access
// functions a page away from their callers, 4% of the samples in `dprof_selftest_consume`
// landed on its entry instead of an access; with a page boundary inside it, 20%. Each section
// stays under a page (scripts/build-module checks), so nothing in it crosses one wherever
// other code moves.
core::arch::global_asm!(
    ".pushsection .text.dprof_selftest_main, \"ax\", @progbits",
    ".balign 4096",
    ".popsection",
);

/// Writes `value` to `obj.a` 64 times (field `a`, offset 8).
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_main"]
pub extern "C" fn dprof_selftest_produce(obj: *mut SelftestObj, value: u64) {
    // SAFETY: `obj` is a live object owned by the producer; the stores stay inside it.
    unsafe {
        core::arch::asm!(
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            accesses!("mov qword ptr [{obj} + 8], {v}"), accesses!("mov qword ptr [{obj} + 8], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// Reads `obj.a` and `obj.b` 32 times each (offsets 8 and 16); returns the last sum.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_main"]
pub extern "C" fn dprof_selftest_consume(obj: *const SelftestObj) -> u64 {
    let (a, b): (u64, u64);
    // SAFETY: `obj` is a live object owned by the consumer; the loads stay inside it.
    unsafe {
        core::arch::asm!(
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            accesses!("mov {a}, qword ptr [{obj} + 8]"), accesses!("mov {b}, qword ptr [{obj} + 16]"),
            obj = in(reg) obj,
            a = out(reg) a,
            b = out(reg) b,
            options(nostack, readonly),
        );
    }
    a.wrapping_add(b)
}

/// Writes `obj.count` and reads `obj.value` 32 times each (offsets 0 and 8).
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_main"]
pub extern "C" fn dprof_selftest_local_touch(obj: *mut SelftestLocal, count: u64) -> u64 {
    let value: u64;
    // SAFETY: `obj` is a live object owned by the caller; the accesses stay inside it.
    unsafe {
        core::arch::asm!(
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            accesses!("mov qword ptr [{obj}], {c}"), accesses!("mov {v}, qword ptr [{obj} + 8]"),
            obj = in(reg) obj,
            c = in(reg) count,
            v = out(reg) value,
            options(nostack),
        );
    }
    value
}

/// Calls per object of each access function: more samples per slab event, so that the
/// collector keeps up with the allocations.
const CALLS_PER_OBJECT: u64 = 8;

/// Single-producer single-consumer queue of objects between the handoff threads.
struct Queue {
    slots: [AtomicPtr<SelftestObj>; 256],
    head: AtomicUsize,
    tail: AtomicUsize,
    producer_done: AtomicBool,
}

impl Queue {
    const fn new() -> Self {
        Self {
            slots: [const { AtomicPtr::new(core::ptr::null_mut()) }; 256],
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            producer_done: AtomicBool::new(false),
        }
    }

    fn push(&self, obj: *mut SelftestObj) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head.wrapping_sub(self.tail.load(Ordering::Acquire)) == self.slots.len() {
            return false;
        }
        self.slots[head % self.slots.len()].store(obj, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    fn pop(&self) -> Option<*mut SelftestObj> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        let obj = self.slots[tail % self.slots.len()].load(Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(obj)
    }
}

/// One run of a workload; lives on the stack of the writer of the control file, which waits
/// for every thread of the run.
struct Run {
    deadline_ns: u64,
    queue: Queue,
}

/// The producer's thread of `handoff`.
///
/// # Safety
/// `arg` must be the run's [`Run`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_main"]
unsafe extern "C" fn handoff_producer(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Run of this workload, alive until all its threads are done.
    let run = unsafe { &*arg.cast::<Run>() };
    let mut seq = 0u64;
    while now_ns() < run.deadline_ns {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_obj() };
        if obj.is_null() {
            cond_resched();
            continue;
        }
        seq += 1;
        // SAFETY: freshly allocated, owned here until queued.
        unsafe { (*obj).seq = seq };
        for _ in 0..CALLS_PER_OBJECT {
            block_boundary();
            dprof_selftest_produce(obj, seq);
        }
        while !run.queue.push(obj) {
            cond_resched();
        }
        if seq % 32 == 0 {
            pause_us(100);
        }
    }
    run.queue.producer_done.store(true, Ordering::Release);
    0
}

/// The consumer's thread of `handoff`.
///
/// # Safety
/// `arg` must be the run's [`Run`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_main"]
unsafe extern "C" fn handoff_consumer(arg: *mut c_void) -> c_int {
    // SAFETY: as for the producer.
    let run = unsafe { &*arg.cast::<Run>() };
    let mut consumed = 0u64;
    loop {
        if let Some(obj) = run.queue.pop() {
            for _ in 0..CALLS_PER_OBJECT {
                block_boundary();
                dprof_selftest_consume(obj);
            }
            // SAFETY: the consumer owns popped objects; each is freed once.
            unsafe { dprof_selftest_shim_free_obj(obj) };
            consumed += 1;
            if consumed % 64 == 0 {
                cond_resched();
            }
        } else if run.queue.producer_done.load(Ordering::Acquire) {
            // The producer is done; anything it queued before saying so is visible now.
            if run.queue.pop().is_none() {
                break;
            }
        } else {
            pause_us(20);
        }
    }
    // Whatever the last check raced with is freed too.
    while let Some(obj) = run.queue.pop() {
        // SAFETY: as above.
        unsafe { dprof_selftest_shim_free_obj(obj) };
    }
    0
}

/// The thread of `local`.
///
/// # Safety
/// `arg` must be the run's [`Run`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_main"]
unsafe extern "C" fn local_worker(arg: *mut c_void) -> c_int {
    // SAFETY: as for the producer.
    let run = unsafe { &*arg.cast::<Run>() };
    let mut count = 0u64;
    while now_ns() < run.deadline_ns {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_local() };
        if obj.is_null() {
            cond_resched();
            continue;
        }
        count += 1;
        for _ in 0..CALLS_PER_OBJECT {
            block_boundary();
            dprof_selftest_local_touch(obj, count);
        }
        // SAFETY: allocated above, freed once.
        unsafe { dprof_selftest_shim_free_local(obj) };
        if count % 32 == 0 {
            pause_us(100);
        }
    }
    0
}

/// Parses "WORKLOAD MS" (ASCII, optional trailing newline).
/// A decimal number of at most `digits` digits.
fn parse_number(text: &[u8], digits: usize) -> Option<u64> {
    if text.is_empty() || text.len() > digits {
        return None;
    }
    let mut value = 0u64;
    for &d in text {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(d - b'0');
    }
    Some(value)
}

/// The numbers a command gives after its duration.
type Extra = [Option<u64>; 2];

/// `NAME MS [A [B]]`: the workload, its duration (`causal-rounds`: its rounds) and the
/// numbers after it: for `handoff` the producer's and the consumer's CPUs (0 and 1 unless
/// given), for `causal-arrival` the time between arrivals in microseconds (1000 unless
/// given, 100 to 100000), for `causal-rounds` the calls of X accesses per step and of Y
/// accesses per round (1 to 10000 each, both or neither).
fn parse_command(cmd: &[u8]) -> Option<(&[u8], u64, Extra)> {
    let cmd = cmd.strip_suffix(b"\n").unwrap_or(cmd);
    let mut words = cmd.split(|&c| c == b' ');
    let name = words.next()?;
    let ms = parse_number(words.next()?, 6).filter(|ms| (1..=60_000).contains(ms))?;
    let mut extra = [None; 2];
    for slot in &mut extra {
        match words.next() {
            Some(text) => *slot = Some(parse_number(text, 6)?),
            None => break,
        }
    }
    let fits = match (name, extra) {
        (_, [None, None]) => true,
        (b"handoff", [Some(p), Some(c)]) => p < 4096 && c < 4096,
        (b"causal-arrival", [Some(gap), None]) => (100..=100_000).contains(&gap),
        (b"causal-rounds", [Some(x), Some(y)]) => {
            (1..=10_000).contains(&x) && (1..=10_000).contains(&y)
        }
        _ => false,
    };
    (fits && words.next().is_none()).then_some((name, ms, extra))
}

#[no_mangle]
extern "C" fn dprof_selftest_rs_run(cmd: *const c_char, len: usize) -> c_int {
    // SAFETY: the shim passes a buffer of `len` bytes it copied from user space.
    let cmd = unsafe { core::slice::from_raw_parts(cmd.cast::<u8>(), len) };
    let Some((name, ms, extra)) = parse_command(cmd) else {
        return EINVAL.to_errno();
    };
    // parse_command keeps CPUs below 4096.
    let handoff_cpus = [
        extra[0].unwrap_or(0) as c_int,
        extra[1].unwrap_or(1) as c_int,
    ];
    let run = Run {
        deadline_ns: now_ns() + ms * 1_000_000,
        queue: Queue::new(),
    };
    let result = match name {
        b"handoff" => run_threads(&run, &handoff_cpus, &[handoff_producer, handoff_consumer]),
        b"local" => run_threads(&run, &[0], &[local_worker]),
        b"falseshare" => misses::falseshare(ms),
        b"trueshare" => misses::trueshare(ms),
        b"conflict" => misses::conflict(ms),
        b"capacity" => misses::capacity(ms),
        b"causal" => causal::causal(ms),
        // parse_command keeps both counts within 1..=10000.
        b"causal-rounds" => causal::causal_rounds(
            ms,
            extra[0].zip(extra[1]).map(|(x, y)| (x as u32, y as u32)),
        ),
        b"causal-blocking" => causal_blocking::run(ms),
        b"causal-wakeup" => causal_blocking::wakeup(ms),
        b"causal-arrival" => causal_arrival::run(ms, extra[0].unwrap_or(1000)),
        b"relay" => relay::relay(ms),
        b"bulk" => bulk::bulk(ms),
        b"ephemeral" => ephemeral::ephemeral(ms),
        b"ephemeral-hold" => ephemeral::hold(),
        _ => Err(EINVAL),
    };
    match result {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

struct Selftest;

impl kernel::Module for Selftest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: process context (module init).
        let ret = unsafe { dprof_selftest_shim_init() };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(Self)
    }
}

impl Drop for Selftest {
    fn drop(&mut self) {
        // SAFETY: init succeeded; no run is in progress (the control file pins the module).
        unsafe { dprof_selftest_shim_exit() };
    }
}
