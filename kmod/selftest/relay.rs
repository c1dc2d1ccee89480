// SPDX-License-Identifier: GPL-2.0

//! `relay MS`: a fixed sequence of field accesses on known CPUs, the ground truth of
//! whole-object histories (`dprof collect --histories full:dprof_selftest_relay`).
//!
//! Each `dprof_selftest_relay` object (selftest.h: `head` at 0, `count` at 16, `flags` at 32,
//! `stamp` at 48, with 8 bytes of padding after each, so that each field falls in another
//! pair of chunks and the merge must join the orders of several targets) takes this path, one
//! access per step, one object at a time:
//!
//! | step | CPU | function | access |
//! |---|---|---|---|
//! | 1 | 0 | `dprof_selftest_relay_fill` | write `head` (+0) |
//! | 2 | 0 | `dprof_selftest_relay_fill` | write `stamp` (+48) |
//! | 3 | 1 | `dprof_selftest_relay_pass` | read `head` (+0) |
//! | 4 | 1 | `dprof_selftest_relay_pass` | write `count` (+16) |
//! | 5 | 0 | `dprof_selftest_relay_finish` | read `count` (+16) |
//! | 6 | 0 | `dprof_selftest_relay_finish` | write `flags` (+32) |
//! | 7 | 0 | `dprof_selftest_relay_finish` | read `stamp` (+48) |
//!
//! then CPU 0 frees it. The object is allocated without zeroing, and nothing else touches it:
//! the hand-over goes through a slot on the control file writer's stack.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::workload::{block_boundary, cond_resched, now_ns, pause_us, run_threads};

/// Mirrors `struct dprof_selftest_relay` (selftest.h).
#[repr(C)]
pub(crate) struct SelftestRelay {
    head: u64,
    pad_head: u64,
    count: u64,
    pad_count: u64,
    flags: u64,
    pad_flags: u64,
    stamp: u64,
    pad_stamp: u64,
}

assert_c_layout!(SelftestRelay, size 64, { head: 0, count: 16, flags: 32, stamp: 48 });

extern "C" {
    fn dprof_selftest_shim_alloc_relay() -> *mut SelftestRelay;
    fn dprof_selftest_shim_free_relay(obj: *mut SelftestRelay);
}

// The access functions and their loops, in a page-aligned section of their own (see the
// comment on `.text.dprof_selftest_main` in selftest_main.rs).
core::arch::global_asm!(
    ".pushsection .text.dprof_selftest_relay, \"ax\", @progbits",
    ".balign 4096",
    ".popsection",
);

/// Steps 1 and 2: writes `head`, then `stamp`.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_relay"]
pub(crate) extern "C" fn dprof_selftest_relay_fill(obj: *mut SelftestRelay, value: u64) {
    // SAFETY: `obj` is a live object owned by CPU 0's thread; the stores stay inside it.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_relay_fill", "jmp 2f", "2:",
            accesses!("mov qword ptr [{obj}], {v}"),
            accesses!("mov qword ptr [{obj} + 48], {v}"),
            obj = in(reg) obj,
            v = in(reg) value,
            options(nostack),
        );
    }
}

/// Steps 3 and 4: reads `head`, writes it plus one to `count`.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_relay"]
pub(crate) extern "C" fn dprof_selftest_relay_pass(obj: *mut SelftestRelay) {
    // SAFETY: `obj` was handed to CPU 1's thread, which owns it until it hands it back.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_relay_pass", "jmp 2f", "2:",
            accesses!("mov {t}, qword ptr [{obj}]"),
            "inc {t}",
            accesses!("mov qword ptr [{obj} + 16], {t}"),
            obj = in(reg) obj,
            t = out(reg) _,
            options(nostack),
        );
    }
}

/// Steps 5 to 7: reads `count`, writes `flags`, reads `stamp`; returns `count - stamp`, which
/// is 1 when the object went the whole way.
#[no_mangle]
#[inline(never)]
#[link_section = ".text.dprof_selftest_relay"]
pub(crate) extern "C" fn dprof_selftest_relay_finish(obj: *mut SelftestRelay) -> u64 {
    let (count, stamp): (u64, u64);
    // SAFETY: `obj` is back with CPU 0's thread, which frees it after this.
    unsafe {
        core::arch::asm!(
            "# dprof_selftest_relay_finish", "jmp 2f", "2:",
            accesses!("mov {c}, qword ptr [{obj} + 16]"),
            accesses!("mov qword ptr [{obj} + 32], {c}"),
            accesses!("mov {s}, qword ptr [{obj} + 48]"),
            obj = in(reg) obj,
            c = out(reg) count,
            s = out(reg) stamp,
            options(nostack),
        );
    }
    count.wrapping_sub(stamp)
}

/// How long a thread waits for its partner past the deadline before the run fails.
const PARTNER_GRACE_NS: u64 = 2_000_000_000;

/// One `relay` run; lives on the control file writer's stack.
struct Relay {
    deadline_ns: u64,
    /// The object in flight: CPU 0 stores it for CPU 1 and waits for it to come back.
    slot: AtomicPtr<SelftestRelay>,
    /// Odd: CPU 1's turn; even: CPU 0's.
    turn: AtomicU64,
    done: AtomicBool,
    failed: AtomicBool,
}

impl Relay {
    /// Waits until `ready` holds, in short sleeps; false when the partner is long overdue or
    /// failed.
    fn wait(&self, ready: impl Fn() -> bool) -> bool {
        while !ready() {
            if self.failed.load(Ordering::Relaxed) || now_ns() > self.deadline_ns + PARTNER_GRACE_NS
            {
                self.failed.store(true, Ordering::Relaxed);
                return false;
            }
            pause_us(10);
        }
        true
    }
}

/// CPU 0: allocates, fills, hands over, takes back, finishes and frees, object after object.
///
/// # Safety
/// `arg` must be the run's [`Relay`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_relay"]
unsafe extern "C" fn relay_first(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Relay of this run, alive until all its threads are done.
    let relay = unsafe { &*arg.cast::<Relay>() };
    let mut value = 0u64;
    while now_ns() < relay.deadline_ns && !relay.failed.load(Ordering::Relaxed) {
        // SAFETY: process context.
        let obj = unsafe { dprof_selftest_shim_alloc_relay() };
        if obj.is_null() {
            cond_resched();
            continue;
        }
        value += 1;
        block_boundary();
        dprof_selftest_relay_fill(obj, value);
        relay.slot.store(obj, Ordering::Relaxed);
        let turn = relay.turn.fetch_add(1, Ordering::AcqRel) + 1;
        let back = relay.wait(|| relay.turn.load(Ordering::Acquire) == turn + 1);
        if back {
            block_boundary();
            if dprof_selftest_relay_finish(obj) != 1 {
                relay.failed.store(true, Ordering::Relaxed);
            }
        }
        // SAFETY: allocated above; CPU 1 is done with it (or the run failed and CPU 1 gave
        // up: it touches the slot's object only on its turn, which is over or never comes).
        unsafe { dprof_selftest_shim_free_relay(obj) };
        if !back {
            break;
        }
        if value % 16 == 0 {
            pause_us(200);
        }
    }
    relay.done.store(true, Ordering::Release);
    0
}

/// CPU 1: on its turn, passes the object on and hands it back.
///
/// # Safety
/// `arg` must be the run's [`Relay`], alive until the thread is done.
#[link_section = ".text.dprof_selftest_relay"]
unsafe extern "C" fn relay_second(arg: *mut c_void) -> c_int {
    // SAFETY: as for `relay_first`.
    let relay = unsafe { &*arg.cast::<Relay>() };
    loop {
        let ready = relay.wait(|| {
            relay.turn.load(Ordering::Acquire) % 2 == 1 || relay.done.load(Ordering::Acquire)
        });
        if !ready || relay.turn.load(Ordering::Acquire) % 2 == 0 {
            break;
        }
        block_boundary();
        dprof_selftest_relay_pass(relay.slot.load(Ordering::Relaxed));
        relay.turn.fetch_add(1, Ordering::AcqRel);
    }
    0
}

pub(crate) fn relay(ms: u64) -> Result {
    let relay = Relay {
        deadline_ns: now_ns() + ms * 1_000_000,
        slot: AtomicPtr::new(core::ptr::null_mut()),
        turn: AtomicU64::new(0),
        done: AtomicBool::new(false),
        failed: AtomicBool::new(false),
    };
    run_threads(&relay, &[0, 1], &[relay_first, relay_second])?;
    if relay.failed.load(Ordering::Relaxed) {
        return Err(EIO);
    }
    Ok(())
}
