// SPDX-License-Identifier: GPL-2.0

//! `causal MS`: a critical-path type and an off-path type, the ground truth of causal
//! experiments. Each type has a dedicated cache named like its struct (selftest.h).
//!
//! The run is a sequence of rounds, numbered from 1:
//!
//! - the *chain* thread on CPU 0, for each round, allocates one `dprof_selftest_causal_x`,
//!   runs [`CHAIN_STEPS`] steps of [`X_CALLS_PER_STEP`] calls of
//!   `dprof_selftest_causal_x_touch` (writes `step`, offset 0, and reads `value`, offset 8)
//!   and [`COMPUTE_CALLS_PER_STEP`] calls of `dprof_selftest_causal_compute` (arithmetic on
//!   registers, no memory operand), frees the object, waits until the worker has done its
//!   part of the round (the barrier), calls the progress point `dprof_selftest_causal_round`
//!   and goes on to the next round;
//! - the *worker* thread on CPU 1, for each round, allocates one `dprof_selftest_causal_y`,
//!   makes [`Y_CALLS`] calls of `dprof_selftest_causal_y_touch` (writes `count`, offset 0, and
//!   reads `value`, offset 8), frees it and says so; it may be up to [`WORKER_LEAD`] rounds
//!   ahead of the chain, and spins while it is that far ahead.
//!
//! Per round the chain spends about 20% of its time on X and 80% computing; the worker about
//! 60% on Y and the rest waiting (see the counts for what was measured; each run prints its
//! own figures, `dprof_selftest: causal: ...`, with the chain's time waiting for the worker,
//! which must stay near 0: measured 0-6% of a round, when the host stalls vCPU 1 for longer
//! than the worker's lead). So:
//!
//! - the data profile, samples per type by time, ranks Y above X (Y has 2.8 times X's
//!   accesses);
//! - X is on the critical path: a round ends when the chain ends, and the chain's length is a
//!   fixed number of accesses and computations, independent of the sampler. Virtually
//!   speeding X up by s delays CPU 1 by s times X's share of the round, which the worker
//!   absorbs in its slack, so the program speeds up by about s x 20%: X's slope is clearly
//!   positive;
//! - Y is off the critical path: speeding Y up delays the chain by s times Y's share, which
//!   lengthens every round by exactly the delay inserted, so the effective round time, and
//!   the progress rate, do not change: Y's slope is zero.
//!
//! The worker *spins* while it waits, it does not sleep: a sleeping CPU is idle, and the
//! profiler credits an idle CPU with the delays it owes instead of pausing it. A worker that
//! spins is running when X is sped up, so the delays it owes are served as real pauses: the
//! test shows that pausing an off-path CPU does not slow progress, rather than relying on
//! idle crediting. A sleeping worker would also have to be woken by the chain, on the
//! critical path. The spin calls `cond_resched()` (the guest kernel is not preemptible), so
//! the collector can run in the worker's slack; the chain calls it once per round, after the
//! progress point.
//!
//! The chain ends the run at the first round end past the deadline; the worker stops then.
//! Work is sized by call counts, never by time, so a round's work is the same whatever the
//! sampler costs. `causal-rounds N` ends it after N rounds instead (a fixed amount of work,
//! for end-to-end experiments, which time whole runs: a run's time is then the chain's
//! critical path times N), with [`ROUNDS_DEADLINE_MS`] as the deadline. `causal-rounds N X
//! Y` also sets the calls of X accesses per step and of Y accesses per round (defaults
//! [`X_CALLS_PER_STEP`] and [`Y_CALLS`]): whole runs under TCG vary by a fifth, and an
//! end-to-end test needs X's share, and so its slope, well above that noise.
//!
//! Progress: `dprof_selftest_causal_round` (in kallsyms, never inlined) runs exactly once per
//! round and counts it; `/sys/kernel/debug/dprof_selftest/causal_rounds` reads the rounds done
//! since the module was loaded, in decimal, so that a test can compare a kprobe's visits with
//! the workload's own count.
//!
//! Objects: one X and one Y per round, allocated and freed by the thread that touches them
//! (4 slab events per round: 1600-3700 per second), so the address set sees each object and
//! the samples resolve to the types. The barrier lives on the control file writer's stack and
//! the computation touches no memory: nothing else in a round is in a slab cache.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::workload::{block_boundary, cond_resched, now_ns, run_threads};

/// Mirrors `struct dprof_selftest_causal_x` (selftest.h).
#[repr(C)]
pub(crate) struct CausalX {
    step: u64,
    value: u64,
    pad: [u64; 6],
}

assert_c_layout!(CausalX, size 64, { step: 0, value: 8, pad: 16 });

/// Mirrors `struct dprof_selftest_causal_y` (selftest.h).
#[repr(C)]
pub(crate) struct CausalY {
    count: u64,
    value: u64,
    pad: [u64; 6],
}

assert_c_layout!(CausalY, size 64, { count: 0, value: 8, pad: 16 });

extern "C" {
    pub(crate) fn dprof_selftest_shim_alloc_causal_x() -> *mut CausalX;
    pub(crate) fn dprof_selftest_shim_free_causal_x(obj: *mut CausalX);
    pub(crate) fn dprof_selftest_shim_alloc_causal_y() -> *mut CausalY;
    pub(crate) fn dprof_selftest_shim_free_causal_y(obj: *mut CausalY);
}

// The counts, measured in the QEMU TCG guest (selftest-causal): while dprof collects slab
// events and samples every 100 us, a round took about 500 us; in it the chain spent 100 us
// on X and 360 us computing (X 22% of its time), the worker 320 us on Y (64% of the round)
// and then waited; Y got 3.6 times X's samples. During the causal experiments (a sample
// every 1 ms) a round took 410 us: X 90, computing 316, Y 256. X's share is kept near a fifth
// so that Y can have about three times X's samples and still leave the worker slack for the
// delays an experiment on X makes it serve (Y + X about 85% of the round at a 100% virtual
// speedup): a worker without slack would put Y on the critical path. X's slope is then
// about 0.18 (measured), its 95% interval about +-0.02 wide.

/// Steps of the chain per round; each step accesses X, then computes.
const CHAIN_STEPS: u32 = 10;
/// Calls of `dprof_selftest_causal_x_touch` per step (128 accesses each).
const X_CALLS_PER_STEP: u32 = 50;
/// Calls of `dprof_selftest_causal_compute` per step (128 instructions each).
const COMPUTE_CALLS_PER_STEP: u32 = 180;
/// Calls of `dprof_selftest_causal_y_touch` per round (128 accesses each).
const Y_CALLS: u32 = 1400;

/// Rounds the worker may run ahead of the chain: the chain's barrier (the worker's part of
/// round k done when the chain ends round k) then costs it nothing, as the worker finished
/// that part long ago. In lock step, the handoff itself is on the critical path: under TCG
/// on a loaded host a vCPU noticed its partner's store 1 ms late on average and up to 20 ms
/// (measured, both spinning; the host deschedules a vCPU's thread), so the chain waited for
/// the worker's late start and its Y phase every round, and Y was on the critical path. With
/// 16 rounds of lead the chain still waited in 4% of the time: vCPU 1 stalled up to 90 ms
/// now and then. 64 rounds (about 130 ms) absorb that.
const WORKER_LEAD: u64 = 64;

/// Spins of a waiting thread between two `cond_resched()` calls.
const SPINS_PER_RESCHED: u32 = 64;
/// Spins of a waiting thread between two reads of the clock (for [`PARTNER_GRACE_NS`]).
/// Rarely: QEMU's TCG serves every vCPU's TSC reads under one lock (see
/// `PAUSE_SPINS_PER_CLOCK_READ` in dprof.ko), and the worker's waits grow when the chain is
/// slowed, so frequent reads would tie the chain's speed to how long the worker waits.
const SPINS_PER_CLOCK_READ: u32 = 64 * 1024;

/// How long a thread waits for its partner past the deadline before giving up (a partner
/// that never started).
const PARTNER_GRACE_NS: u64 = 2_000_000_000;

/// Rounds done since the module was loaded (`causal_rounds` in debugfs).
static ROUNDS: AtomicU64 = AtomicU64::new(0);

/// The progress point: runs once at the end of every round of the chain, and counts it.
/// A kprobe target: exported, never inlined, and its body (the only update of [`ROUNDS`])
/// is its own, so it cannot be merged with another function.
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn dprof_selftest_causal_round() {
    ROUNDS.fetch_add(1, Ordering::Relaxed);
}

/// Rounds done since load, for the `causal_rounds` debugfs file (selftest_shim.c).
#[no_mangle]
extern "C" fn dprof_selftest_rs_causal_rounds() -> u64 {
    ROUNDS.load(Ordering::Relaxed)
}

// The access functions and their loops, in a page-aligned section of their own (see the
// comment on `.text.dprof_selftest_main` in selftest_main.rs).
core::arch::global_asm!(
    ".pushsection .text.dprof_selftest_causal, \"ax\", @progbits",
    ".balign 4096",
    ".popsection",
);

// Each function's assembly starts with a comment naming it, so that LLVM cannot merge
// functions of identical code (the two touch functions) into one symbol. `.rept` repeats an
// instruction and the jump after it (see `accesses!`); `2:` is redefined each time and
// `2f` names the next one. 128 per call rather than 64: fewer samples on the loops.

/// Writes `obj.step` (offset 0) and reads `obj.value` (offset 8) 64 times each; returns the
/// value read.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_causal"]
pub(crate) extern "C" fn dprof_selftest_causal_x_touch(obj: *mut CausalX, step: u64) -> u64 {
    let value: u64;
    // SAFETY: `obj` is the live X object of this round, owned by the chain; the accesses stay
    // inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_causal_x_touch", "jmp 2f", "2:",
            ".rept 64",
            accesses!("mov qword ptr [{obj}], {s}"),
            accesses!("mov {v}, qword ptr [{obj} + 8]"),
            ".endr",
            obj = in(reg) obj,
            s = in(reg) step,
            v = out(reg) value,
            options(nostack),
        );
    }
    value
}

/// Writes `obj.count` (offset 0) and reads `obj.value` (offset 8) 64 times each; returns the
/// value read.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_causal"]
pub(crate) extern "C" fn dprof_selftest_causal_y_touch(obj: *mut CausalY, count: u64) -> u64 {
    let value: u64;
    // SAFETY: `obj` is the live Y object of this round, owned by the worker; the accesses
    // stay inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_causal_y_touch", "jmp 2f", "2:",
            ".rept 64",
            accesses!("mov qword ptr [{obj}], {c}"),
            accesses!("mov {v}, qword ptr [{obj} + 8]"),
            ".endr",
            obj = in(reg) obj,
            c = in(reg) count,
            v = out(reg) value,
            options(nostack),
        );
    }
    value
}

/// The chain's work that touches no slab type: 128 arithmetic instructions on registers,
/// each followed by a jump like the accesses, so that samples land on them. Returns the
/// result, which the chain feeds back in.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_causal"]
pub(crate) extern "C" fn dprof_selftest_causal_compute(seed: u64) -> u64 {
    let mut acc = seed;
    // SAFETY: arithmetic on registers only; touches no memory.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_causal_compute", "jmp 2f", "2:",
            ".rept 64",
            accesses!("imul {acc}, {mul}"),
            accesses!("add {acc}, {inc}"),
            ".endr",
            acc = inout(reg) acc,
            mul = in(reg) 6_364_136_223_846_793_005u64,
            inc = in(reg) 1_442_695_040_888_963_407u64,
            options(nomem, nostack),
        );
    }
    acc
}

/// The deadline of `causal-rounds N`, reached only by a run that cannot do its rounds.
const ROUNDS_DEADLINE_MS: u64 = 60_000;

/// One run of `causal MS` or `causal-rounds N`; lives on the stack of the control file
/// writer, which waits for both threads.
struct Causal {
    deadline_ns: u64,
    /// Calls of the X accesses per step of the chain, and of the Y accesses per round.
    x_calls_per_step: u32,
    y_calls: u32,
    /// The chain ends after this round, if the deadline has not come first.
    last_round: u64,
    /// The last round the chain completed (0 before the first).
    chain_done: AtomicU64,
    /// The last round whose part the worker completed.
    worker_done: AtomicU64,
    /// The chain completes no more rounds.
    done: AtomicBool,
    /// A thread gave up waiting for the other, or could not allocate: the run fails.
    failed: AtomicBool,
    /// What the run measured, for its summary (times in ns).
    stats: Stats,
}

/// Totals over a run, stored by each thread when it is done.
#[derive(Default)]
struct Stats {
    /// Rounds completed, and the time from the first round's start to the last one's end.
    rounds: AtomicU64,
    elapsed_ns: AtomicU64,
    /// The chain: time in X accesses, in computation, and waiting for the worker.
    x_ns: AtomicU64,
    compute_ns: AtomicU64,
    chain_wait_ns: AtomicU64,
    /// The worker: time in Y accesses (with its allocation and free), and waiting.
    y_ns: AtomicU64,
    worker_wait_ns: AtomicU64,
}

impl Causal {
    /// Spins until `ready` holds, letting others run now and then. False when the partner is
    /// long overdue or the run failed.
    ///
    /// No `pause` (`core::hint::spin_loop()`) in the loop: under QEMU's TCG each `pause` ends
    /// the vCPU's run of translated code and takes QEMU's global lock on the way back
    /// (`helper_pause`: "let another CPU run"), the lock the other vCPU needs for its
    /// interrupts.
    #[link_section = ".text.dprof_selftest_causal"]
    fn wait(&self, ready: impl Fn() -> bool) -> bool {
        let mut spins = 0u32;
        while !ready() {
            spins = spins.wrapping_add(1);
            if spins % SPINS_PER_RESCHED == 0 {
                cond_resched();
            }
            if spins % SPINS_PER_CLOCK_READ == 0 {
                if self.failed.load(Ordering::Relaxed)
                    || now_ns() > self.deadline_ns.wrapping_add(PARTNER_GRACE_NS)
                {
                    self.failed.store(true, Ordering::Relaxed);
                    return false;
                }
            }
        }
        true
    }
}

/// The chain's part of one round on `obj`: `x_calls` calls of the X accesses and
/// [`COMPUTE_CALLS_PER_STEP`] computations in each of [`CHAIN_STEPS`] steps. Returns (time in
/// X accesses, time computing) in ns.
#[inline(never)]
#[link_section = ".text.dprof_selftest_causal"]
fn chain_round(obj: *mut CausalX, round: u64, x_calls: u32) -> (u64, u64) {
    let (mut x_ns, mut compute_ns) = (0u64, 0u64);
    let mut acc = round;
    for step in 0..CHAIN_STEPS {
        let t0 = now_ns();
        for _ in 0..x_calls {
            block_boundary();
            acc = acc.wrapping_add(dprof_selftest_causal_x_touch(obj, u64::from(step)));
        }
        let t1 = now_ns();
        for _ in 0..COMPUTE_CALLS_PER_STEP {
            block_boundary();
            acc = dprof_selftest_causal_compute(acc);
        }
        let t2 = now_ns();
        x_ns = x_ns.wrapping_add(t1.wrapping_sub(t0));
        compute_ns = compute_ns.wrapping_add(t2.wrapping_sub(t1));
    }
    core::hint::black_box(acc);
    (x_ns, compute_ns)
}

/// The worker's part of one round on `obj`: `calls` calls of the Y accesses.
#[inline(never)]
#[link_section = ".text.dprof_selftest_causal"]
fn worker_round(obj: *mut CausalY, round: u64, calls: u32) {
    let mut acc = 0u64;
    for _ in 0..calls {
        block_boundary();
        acc = acc.wrapping_add(dprof_selftest_causal_y_touch(obj, round));
    }
    core::hint::black_box(acc);
}

/// The chain's thread.
///
/// # Safety
/// `arg` must be the run's [`Causal`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_causal"]
unsafe extern "C" fn causal_chain(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Causal of this run, alive until both its threads are done.
    let run = unsafe { &*arg.cast::<Causal>() };
    let (mut x_ns, mut compute_ns, mut wait_ns) = (0u64, 0u64, 0u64);
    let mut round = 0u64;
    let first_start = now_ns();
    let mut end = first_start;
    loop {
        round = round.wrapping_add(1);
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_causal_x() };
        if obj.is_null() {
            run.failed.store(true, Ordering::Relaxed);
            break;
        }
        let (x, compute) = chain_round(obj, round, run.x_calls_per_step);
        // SAFETY: allocated above, freed once, no longer accessed.
        unsafe { dprof_selftest_shim_free_causal_x(obj) };
        let t0 = now_ns();
        // The barrier: the round ends when the worker's part of it is done too (long ago,
        // unless the worker was held up for more than its lead).
        if !run.wait(|| run.worker_done.load(Ordering::Acquire) >= round) {
            break;
        }
        dprof_selftest_causal_round();
        end = now_ns();
        x_ns = x_ns.wrapping_add(x);
        compute_ns = compute_ns.wrapping_add(compute);
        wait_ns = wait_ns.wrapping_add(end.wrapping_sub(t0));
        run.stats.rounds.store(round, Ordering::Relaxed);
        run.chain_done.store(round, Ordering::Release);
        // Others (the collector) get CPU 0 here, between rounds, if they need it.
        cond_resched();
        if round >= run.last_round || now_ns() >= run.deadline_ns {
            break;
        }
    }
    let stats = &run.stats;
    stats
        .elapsed_ns
        .store(end.wrapping_sub(first_start), Ordering::Relaxed);
    stats.x_ns.store(x_ns, Ordering::Relaxed);
    stats.compute_ns.store(compute_ns, Ordering::Relaxed);
    stats.chain_wait_ns.store(wait_ns, Ordering::Relaxed);
    run.done.store(true, Ordering::Release);
    0
}

/// The worker's thread.
///
/// # Safety
/// `arg` must be the run's [`Causal`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_causal"]
unsafe extern "C" fn causal_worker(arg: *mut c_void) -> c_int {
    // SAFETY: as for the chain.
    let run = unsafe { &*arg.cast::<Causal>() };
    let (mut y_ns, mut wait_ns) = (0u64, 0u64);
    let mut round = 0u64;
    loop {
        round = round.wrapping_add(1);
        let t0 = now_ns();
        // At most WORKER_LEAD rounds ahead of the chain.
        let may_start = || {
            run.chain_done
                .load(Ordering::Acquire)
                .wrapping_add(WORKER_LEAD)
                >= round
                || run.done.load(Ordering::Acquire)
        };
        if !run.wait(may_start) || run.done.load(Ordering::Acquire) {
            break;
        }
        let t1 = now_ns();
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_causal_y() };
        if obj.is_null() {
            run.failed.store(true, Ordering::Relaxed);
            break;
        }
        worker_round(obj, round, run.y_calls);
        // SAFETY: allocated above, freed once, no longer accessed.
        unsafe { dprof_selftest_shim_free_causal_y(obj) };
        run.worker_done.store(round, Ordering::Release);
        let t2 = now_ns();
        wait_ns = wait_ns.wrapping_add(t1.wrapping_sub(t0));
        y_ns = y_ns.wrapping_add(t2.wrapping_sub(t1));
    }
    run.stats.y_ns.store(y_ns, Ordering::Relaxed);
    run.stats.worker_wait_ns.store(wait_ns, Ordering::Relaxed);
    0
}

/// `causal MS`: rounds until the deadline.
pub(crate) fn causal(ms: u64) -> Result {
    run(ms, u64::MAX, X_CALLS_PER_STEP, Y_CALLS)
}

/// `causal-rounds N [X Y]`: `rounds` rounds, with `calls` (X accesses per step, Y accesses
/// per round) when given.
pub(crate) fn causal_rounds(rounds: u64, calls: Option<(u32, u32)>) -> Result {
    let (x, y) = calls.unwrap_or((X_CALLS_PER_STEP, Y_CALLS));
    run(ROUNDS_DEADLINE_MS, rounds, x, y)
}

fn run(ms: u64, last_round: u64, x_calls_per_step: u32, y_calls: u32) -> Result {
    let run = Causal {
        deadline_ns: now_ns().wrapping_add(ms.wrapping_mul(1_000_000)),
        x_calls_per_step,
        y_calls,
        last_round,
        chain_done: AtomicU64::new(0),
        worker_done: AtomicU64::new(0),
        done: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        stats: Stats::default(),
    };
    run_threads(&run, &[0, 1], &[causal_chain, causal_worker])?;
    let stats = &run.stats;
    let rounds = stats.rounds.load(Ordering::Relaxed);
    let elapsed_ns = stats.elapsed_ns.load(Ordering::Relaxed);
    // The worker's totals include the rounds it ran ahead; per round they are close enough.
    let per_round = |ns: &AtomicU64| ns.load(Ordering::Relaxed) / rounds.max(1) / 1000;
    pr_info!(
        "causal: {} rounds in {} ms ({} per second, {} us each): chain X {} us, compute {} us, \
         waiting {} us; worker Y {} us, waiting {} us\n",
        rounds,
        elapsed_ns / 1_000_000,
        rounds.wrapping_mul(1_000_000_000) / elapsed_ns.max(1),
        elapsed_ns / rounds.max(1) / 1000,
        per_round(&stats.x_ns),
        per_round(&stats.compute_ns),
        per_round(&stats.chain_wait_ns),
        per_round(&stats.y_ns),
        per_round(&stats.worker_wait_ns),
    );
    if run.failed.load(Ordering::Relaxed) {
        return Err(EIO);
    }
    Ok(())
}
