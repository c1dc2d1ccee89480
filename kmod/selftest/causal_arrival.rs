// SPDX-License-Identifier: GPL-2.0

//! `causal-arrival MS [GAP_US]`: the ground truth of load amplification (arrival points).
//! The types and access functions are the causal workload's (causal.rs).
//!
//! - The *generator* on CPU 0 makes a request arrive every GAP_US (1000 unless given: the
//!   scenario chooses it so that the server is busy the same share of the time on any host),
//!   on a schedule of absolute times (a timer wake-up that comes late does not delay the
//!   next arrival): it calls the arrival point `dprof_selftest_causal_arrive` and wakes the
//!   server. It does not wait for the server (an open loop: requests come at their own
//!   pace). The time the arrival itself took, the delays that dprof makes an arriving task
//!   serve included, moves the schedule on, as it would a generator slowed by them.
//! - The *server* on CPU 1 takes the requests in order, sleeping while there are none. Each
//!   one is [`X_CALLS`] X accesses and [`Y_CALLS`] Y accesses (about the same time each),
//!   then the progress point `dprof_selftest_causal_depart`, then `cond_resched()`.
//!
//! The server is busy a fraction `S / G` of the time, `S` its time per request and `G` the
//! time between arrivals, below 1: throughput is the arrival rate, and speeding X up leaves
//! it as it is (X's throughput slope is 0). Amplified so that requests come every `G' < S`
//! in effective time (`--arrival-speedup`, `G - G'` per arrival), the server is the
//! bottleneck: throughput is `1 / S`, and speeding X up by `p` makes it `1 / (S - p x)`, `x`
//! the X time of a request, while that stays above `G'`.
//!
//! The summary (`dprof_selftest: causal-arrival: ...`) gives the arrivals, the requests
//! served, the time between arrivals and the X and Y times per request, from which the host
//! check computes both answers.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::causal::{
    dprof_selftest_causal_x_touch, dprof_selftest_causal_y_touch,
    dprof_selftest_shim_alloc_causal_x, dprof_selftest_shim_alloc_causal_y,
    dprof_selftest_shim_free_causal_x, dprof_selftest_shim_free_causal_y,
};
use crate::workload::{block_boundary, cond_resched, now_ns, pause_us, run_threads};

/// Calls of the X accesses per request (128 accesses each): about 300 us under TCG.
const X_CALLS: u32 = 600;
/// Calls of the Y accesses per request.
const Y_CALLS: u32 = 600;

extern "C" {
    fn dprof_selftest_shim_handoff_wait(count: *const u64, target: u64) -> bool;
    fn dprof_selftest_shim_handoff_wake();
}

/// Requests arrived since the module was loaded.
static ARRIVED: AtomicU64 = AtomicU64::new(0);
/// Requests served since the module was loaded.
static DEPARTED: AtomicU64 = AtomicU64::new(0);

/// The arrival point: once per request, from the generator. A kprobe target, never inlined.
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn dprof_selftest_causal_arrive() {
    ARRIVED.fetch_add(1, Ordering::Relaxed);
}

/// The progress point: once per request served.
#[no_mangle]
#[inline(never)]
pub(crate) extern "C" fn dprof_selftest_causal_depart() {
    DEPARTED.fetch_add(1, Ordering::Relaxed);
}

/// One run, on the stack of the control file writer.
struct Arrivals {
    deadline_ns: u64,
    /// Time between two arrivals on the generator's schedule.
    gap_ns: u64,
    failed: AtomicBool,
    /// Requests arrived in this run; the server waits on it.
    arrived: AtomicU64,
    generator_done: AtomicBool,
    /// Time from the first arrival to the last (ns).
    first_arrival_ns: AtomicU64,
    last_arrival_ns: AtomicU64,
    served: AtomicU64,
    x_ns: AtomicU64,
    y_ns: AtomicU64,
}

/// # Safety
/// `arg` must be the run's [`Arrivals`], alive until the thread is done.
unsafe extern "C" fn generator(arg: *mut c_void) -> c_int {
    // SAFETY: the writer waits for both threads before the run goes away.
    let run = unsafe { &*arg.cast::<Arrivals>() };
    let mut next = now_ns();
    while now_ns() < run.deadline_ns && !run.failed.load(Ordering::Relaxed) {
        next = next.wrapping_add(run.gap_ns);
        let now = now_ns();
        if now < next {
            pause_us((next - now) / 1000);
        }
        let before = now_ns();
        dprof_selftest_causal_arrive();
        let now = now_ns();
        next = next.wrapping_add(now.wrapping_sub(before));
        if run.arrived.fetch_add(1, Ordering::Release) == 0 {
            run.first_arrival_ns.store(now, Ordering::Relaxed);
        }
        run.last_arrival_ns.store(now, Ordering::Relaxed);
        // SAFETY: process context; a task wakes the server.
        unsafe { dprof_selftest_shim_handoff_wake() };
    }
    run.generator_done.store(true, Ordering::Release);
    // SAFETY: as above.
    unsafe { dprof_selftest_shim_handoff_wake() };
    0
}

/// # Safety
/// As for [`generator`].
unsafe extern "C" fn server(arg: *mut c_void) -> c_int {
    // SAFETY: as for the generator.
    let run = unsafe { &*arg.cast::<Arrivals>() };
    while now_ns() < run.deadline_ns {
        let next = run.served.load(Ordering::Relaxed) + 1;
        // SAFETY: process context; `arrived` outlives the wait (the run outlives both
        // threads), and the shim only reads it.
        let ready = unsafe { dprof_selftest_shim_handoff_wait(run.arrived.as_ptr(), next) };
        if !ready {
            if run.generator_done.load(Ordering::Acquire) {
                break;
            }
            continue;
        }
        if !run.serve(next) {
            break;
        }
        // The guest kernel is not preemptible: a server that never sleeps (amplified, it is
        // always behind) would hold its CPU from the collector and from RCU, whose expedited
        // grace period at each experiment's end then took 85 ms instead of 2, and the queue
        // drained in that gap, where no delay slows the server.
        cond_resched();
    }
    0
}

impl Arrivals {
    /// One request: X accesses on a new X object, Y accesses on a new Y object, the progress
    /// point. False when an object could not be allocated.
    fn serve(&self, request: u64) -> bool {
        // SAFETY: process context.
        let x = unsafe { dprof_selftest_shim_alloc_causal_x() };
        // SAFETY: process context.
        let y = unsafe { dprof_selftest_shim_alloc_causal_y() };
        let ok = !x.is_null() && !y.is_null();
        if ok {
            let mut acc = 0u64;
            let t0 = now_ns();
            for _ in 0..X_CALLS {
                block_boundary();
                acc = acc.wrapping_add(dprof_selftest_causal_x_touch(x, request));
            }
            let t1 = now_ns();
            for _ in 0..Y_CALLS {
                block_boundary();
                acc = acc.wrapping_add(dprof_selftest_causal_y_touch(y, request));
            }
            let t2 = now_ns();
            core::hint::black_box(acc);
            dprof_selftest_causal_depart();
            self.x_ns.fetch_add(t1.wrapping_sub(t0), Ordering::Relaxed);
            self.y_ns.fetch_add(t2.wrapping_sub(t1), Ordering::Relaxed);
            self.served.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.store(true, Ordering::Relaxed);
        }
        if !x.is_null() {
            // SAFETY: allocated above, freed once, no longer accessed.
            unsafe { dprof_selftest_shim_free_causal_x(x) };
        }
        if !y.is_null() {
            // SAFETY: as above.
            unsafe { dprof_selftest_shim_free_causal_y(y) };
        }
        ok
    }
}

/// `causal-arrival MS [GAP_US]`: `gap_us` from the command, or 1000.
pub(crate) fn run(ms: u64, gap_us: u64) -> Result {
    let run = Arrivals {
        deadline_ns: now_ns().wrapping_add(ms.wrapping_mul(1_000_000)),
        gap_ns: gap_us * 1000,
        failed: AtomicBool::new(false),
        arrived: AtomicU64::new(0),
        generator_done: AtomicBool::new(false),
        first_arrival_ns: AtomicU64::new(0),
        last_arrival_ns: AtomicU64::new(0),
        served: AtomicU64::new(0),
        x_ns: AtomicU64::new(0),
        y_ns: AtomicU64::new(0),
    };
    let threads: [unsafe extern "C" fn(*mut c_void) -> c_int; 2] = [generator, server];
    run_threads(&run, &[0, 1], &threads)?;
    let arrived = run.arrived.load(Ordering::Relaxed);
    let served = run.served.load(Ordering::Relaxed);
    let span = run
        .last_arrival_ns
        .load(Ordering::Relaxed)
        .wrapping_sub(run.first_arrival_ns.load(Ordering::Relaxed));
    let per_request = |ns: &AtomicU64| ns.load(Ordering::Relaxed) / served.max(1) / 1000;
    pr_info!(
        "causal-arrival: {} arrivals, {} served in {} ms: arrivals every {} us; per request X \
         {} us, Y {} us\n",
        arrived,
        served,
        ms,
        span / arrived.saturating_sub(1).max(1) / 1000,
        per_request(&run.x_ns),
        per_request(&run.y_ns),
    );
    if run.failed.load(Ordering::Relaxed) {
        return Err(EIO);
    }
    Ok(())
}
