// SPDX-License-Identifier: GPL-2.0

//! `causal-blocking MS`: the ground truth of per-task delay accounting. The types and access
//! functions are the causal workload's (causal.rs); the threads share nothing.
//!
//! - The *spinner* on CPU 0, round after round, allocates one `dprof_selftest_causal_x` and
//!   runs [`STEPS`] steps of [`X_CALLS_PER_STEP`] X accesses and as many computations: X
//!   takes about half its time. It waits for no one.
//! - The *sleeper* on CPU 1, round after round, sleeps about [`SLEEP_US`] on a timer, then
//!   allocates one `dprof_selftest_causal_y`, makes [`Y_CALLS`] Y accesses, frees it and calls
//!   the progress point `dprof_selftest_causal_blocking_round`.
//!
//! Progress is the sleeper's rounds, so really speeding X up changes nothing: X's slope is 0,
//! and Y's is clearly positive (its accesses are most of the sleeper's time awake).
//!
//! Virtually speeding X up inserts delays at the rate `speedup x (X's share of CPU 0)`, and
//! the sleeper must serve every one of them, those inserted while it slept included: the
//! timer that wakes it would have fired that much later in the slowed system. Per task, it
//! owes them on waking (an interrupt woke it) and serves them while it runs: the effective
//! round time, and X's slope, stay as they are. Per CPU, CPU 1 is idle while the sleeper
//! sleeps, so it is credited with the delays of that time, and the sleeper only serves those
//! inserted while it is awake: its rounds look faster by about `s x x x sleep / round`, so X
//! gets a clearly positive slope (a quarter to a third at 100%, by the sleep's share of a
//! round) though it is off the path.
//!
//! The summary (`dprof_selftest: causal-blocking: ...`) gives each thread's times, from
//! which the host check states the per-CPU bias it expects.
//!
//! `causal-wakeup MS` checks the other rule of per-task accounting, the credit of a task woken
//! by another: a *producer* on CPU 0 runs rounds like the spinner's ([`WAKEUP_STEPS`] steps),
//! counts each and wakes a *consumer* on CPU 1, which sleeps until the next round is produced,
//! makes [`WAKEUP_Y_CALLS`] Y accesses and visits the progress point
//! `dprof_selftest_causal_wakeup_round`. Progress follows the producer, so X is on the path:
//! speeding it up by 100% would make each round about X's share of it shorter. The consumer
//! is woken by the producer, which has served the delays (it inserts them: they are its own),
//! so it is credited with them and owes nothing for its sleep: the credits come to about the
//! delay inserted while the consumer slept.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::causal::{
    dprof_selftest_causal_compute, dprof_selftest_causal_x_touch, dprof_selftest_causal_y_touch,
    dprof_selftest_shim_alloc_causal_x, dprof_selftest_shim_alloc_causal_y,
    dprof_selftest_shim_free_causal_x, dprof_selftest_shim_free_causal_y,
};
use crate::workload::{block_boundary, cond_resched, now_ns, run_threads, sleep_exact_us};

/// Steps of the spinner per round; each step accesses X, then computes as long.
const STEPS: u32 = 10;
/// Calls of the X accesses per step, and of the computation (128 instructions each).
const X_CALLS_PER_STEP: u32 = 60;
/// The sleeper's sleep per round (µs, on an hrtimer of its own: [`sleep_exact_us`]). With
/// the usual slack its wake-ups fell on the sampler's ticks and, awake for less than a
/// period (a faster TCG host), it was sampled in Y 2% of the time instead of 30%: Y's slope
/// read +0.05 where the workload's times give +0.4.
const SLEEP_US: u64 = 1000;
/// Calls of the Y accesses per round of the sleeper (128 accesses each): about as long as
/// its sleep under TCG.
const Y_CALLS: u32 = 3000;

/// Steps of the producer per round: four times the spinner's round, so that the consumer's
/// wake-up costs little of it.
const WAKEUP_STEPS: u32 = 40;
/// Calls of the Y accesses per round of the consumer: a fifth of the producer's round.
const WAKEUP_Y_CALLS: u32 = 1000;

/// Rounds of the sleeper since the module was loaded.
static ROUNDS: AtomicU64 = AtomicU64::new(0);

/// The progress point: once per round of the sleeper. A kprobe target, never inlined.
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn dprof_selftest_causal_blocking_round() {
    ROUNDS.fetch_add(1, Ordering::Relaxed);
}

/// The progress point of `causal-wakeup`: once per round of the consumer.
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn dprof_selftest_causal_wakeup_round() {
    ROUNDS.fetch_add(1, Ordering::Relaxed);
}

extern "C" {
    fn dprof_selftest_shim_handoff_wait(count: *const u64, target: u64) -> bool;
    fn dprof_selftest_shim_handoff_wake();
}

/// One run, on the stack of the control file writer.
struct Blocking {
    deadline_ns: u64,
    failed: AtomicBool,
    /// Totals (ns) stored by each thread when it is done.
    spinner_x_ns: AtomicU64,
    spinner_compute_ns: AtomicU64,
    sleeper_rounds: AtomicU64,
    sleeper_sleep_ns: AtomicU64,
    sleeper_y_ns: AtomicU64,
    /// `causal-wakeup`: rounds the producer has finished, and whether it has stopped.
    produced: AtomicU64,
    producer_done: AtomicBool,
}

/// # Safety
/// `arg` must be the run's [`Blocking`], alive until the thread is done.
unsafe extern "C" fn spinner(arg: *mut c_void) -> c_int {
    // SAFETY: the writer waits for both threads before the run goes away.
    let run = unsafe { &*arg.cast::<Blocking>() };
    while now_ns() < run.deadline_ns {
        if !run.x_round(STEPS) {
            break;
        }
        // The collector may use CPU 0 between rounds.
        cond_resched();
    }
    0
}

impl Blocking {
    /// One round of X accesses and as much computation, in `steps` steps, on a new X object;
    /// adds its times to the totals. False when no object could be allocated.
    fn x_round(&self, steps: u32) -> bool {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_causal_x() };
        if obj.is_null() {
            self.failed.store(true, Ordering::Relaxed);
            return false;
        }
        let mut acc = 0u64;
        for step in 0..steps {
            let t0 = now_ns();
            for _ in 0..X_CALLS_PER_STEP {
                block_boundary();
                acc = acc.wrapping_add(dprof_selftest_causal_x_touch(obj, u64::from(step)));
            }
            let t1 = now_ns();
            for _ in 0..X_CALLS_PER_STEP {
                block_boundary();
                acc = dprof_selftest_causal_compute(acc);
            }
            let t2 = now_ns();
            self.spinner_x_ns
                .fetch_add(t1.wrapping_sub(t0), Ordering::Relaxed);
            self.spinner_compute_ns
                .fetch_add(t2.wrapping_sub(t1), Ordering::Relaxed);
        }
        core::hint::black_box(acc);
        // SAFETY: allocated above, freed once, no longer accessed.
        unsafe { dprof_selftest_shim_free_causal_x(obj) };
        true
    }

    /// A round of the thread that makes progress, which waited from `t0` until now: `calls` Y
    /// accesses, the progress point `point`, and the round's times added to the totals.
    /// False when no Y object could be allocated.
    fn progress_round(&self, t0: u64, calls: u32, point: extern "C" fn()) -> bool {
        let t1 = now_ns();
        if !self.y_round(calls, self.sleeper_rounds.load(Ordering::Relaxed)) {
            return false;
        }
        point();
        let t2 = now_ns();
        self.sleeper_rounds.fetch_add(1, Ordering::Relaxed);
        self.sleeper_sleep_ns
            .fetch_add(t1.wrapping_sub(t0), Ordering::Relaxed);
        self.sleeper_y_ns
            .fetch_add(t2.wrapping_sub(t1), Ordering::Relaxed);
        true
    }

    /// `calls` Y accesses on a new Y object. False when none could be allocated.
    fn y_round(&self, calls: u32, round: u64) -> bool {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_causal_y() };
        if obj.is_null() {
            self.failed.store(true, Ordering::Relaxed);
            return false;
        }
        let mut acc = 0u64;
        for _ in 0..calls {
            block_boundary();
            acc = acc.wrapping_add(dprof_selftest_causal_y_touch(obj, round));
        }
        core::hint::black_box(acc);
        // SAFETY: allocated above, freed once, no longer accessed.
        unsafe { dprof_selftest_shim_free_causal_y(obj) };
        true
    }
}

/// # Safety
/// As for [`spinner`].
unsafe extern "C" fn sleeper(arg: *mut c_void) -> c_int {
    // SAFETY: as for the spinner.
    let run = unsafe { &*arg.cast::<Blocking>() };
    while now_ns() < run.deadline_ns {
        let t0 = now_ns();
        sleep_exact_us(SLEEP_US);
        if !run.progress_round(t0, Y_CALLS, dprof_selftest_causal_blocking_round) {
            break;
        }
    }
    0
}

/// # Safety
/// As for [`spinner`].
unsafe extern "C" fn producer(arg: *mut c_void) -> c_int {
    // SAFETY: as for the spinner.
    let run = unsafe { &*arg.cast::<Blocking>() };
    while now_ns() < run.deadline_ns {
        if !run.x_round(WAKEUP_STEPS) {
            break;
        }
        run.produced.fetch_add(1, Ordering::Release);
        // SAFETY: process context; a task wakes the consumer.
        unsafe { dprof_selftest_shim_handoff_wake() };
        cond_resched();
    }
    run.producer_done.store(true, Ordering::Release);
    // SAFETY: as above.
    unsafe { dprof_selftest_shim_handoff_wake() };
    0
}

/// # Safety
/// As for [`spinner`].
unsafe extern "C" fn consumer(arg: *mut c_void) -> c_int {
    // SAFETY: as for the spinner.
    let run = unsafe { &*arg.cast::<Blocking>() };
    loop {
        let t0 = now_ns();
        let next = run.sleeper_rounds.load(Ordering::Relaxed) + 1;
        // SAFETY: process context; `produced` outlives the wait (the run outlives both
        // threads), and the shim only reads it.
        let ready = unsafe { dprof_selftest_shim_handoff_wait(run.produced.as_ptr(), next) };
        if !ready {
            if run.producer_done.load(Ordering::Acquire) {
                break;
            }
            continue;
        }
        if !run.progress_round(t0, WAKEUP_Y_CALLS, dprof_selftest_causal_wakeup_round) {
            break;
        }
    }
    0
}

/// `causal-blocking MS`.
pub(crate) fn run(ms: u64) -> Result {
    run_pair(ms, "causal-blocking", [spinner, sleeper])
}

/// `causal-wakeup MS`.
pub(crate) fn wakeup(ms: u64) -> Result {
    run_pair(ms, "causal-wakeup", [producer, consumer])
}

/// Runs `threads` on CPUs 0 and 1 for `ms`, and prints the summary under `name`.
fn run_pair(
    ms: u64,
    name: &str,
    threads: [unsafe extern "C" fn(*mut c_void) -> c_int; 2],
) -> Result {
    let run = Blocking {
        deadline_ns: now_ns().wrapping_add(ms.wrapping_mul(1_000_000)),
        failed: AtomicBool::new(false),
        spinner_x_ns: AtomicU64::new(0),
        spinner_compute_ns: AtomicU64::new(0),
        sleeper_rounds: AtomicU64::new(0),
        sleeper_sleep_ns: AtomicU64::new(0),
        sleeper_y_ns: AtomicU64::new(0),
        produced: AtomicU64::new(0),
        producer_done: AtomicBool::new(false),
    };
    run_threads(&run, &[0, 1], &threads)?;
    let rounds = run.sleeper_rounds.load(Ordering::Relaxed);
    let per_round = |ns: &AtomicU64| ns.load(Ordering::Relaxed) / rounds.max(1) / 1000;
    let (x, compute) = (
        run.spinner_x_ns.load(Ordering::Relaxed),
        run.spinner_compute_ns.load(Ordering::Relaxed),
    );
    pr_info!(
        "{}: {} rounds in {} ms: sleeper asleep {} us, awake {} us per round; spinner X {}% \
         of its time\n",
        name,
        rounds,
        ms,
        per_round(&run.sleeper_sleep_ns),
        per_round(&run.sleeper_y_ns),
        x.wrapping_mul(100) / x.wrapping_add(compute).max(1),
    );
    if run.failed.load(Ordering::Relaxed) {
        return Err(EIO);
    }
    Ok(())
}
