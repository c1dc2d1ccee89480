//! Object access histories: every access to chosen byte ranges of one object, from its
//! allocation to its free, caught with the x86 debug registers.
//!
//! # Mechanism
//! - At start (process context) one wide read/write breakpoint per range of the plan is
//!   registered through perf (`register_wide_hw_breakpoint`), on a dummy address in this
//!   module. That reserves a debug register on every CPU and routes its #DB to
//!   [`dprof_rs_bp_hit`].
//! - When a planned type is allocated and no history runs (the slab tracepoint probe: the
//!   allocator has initialised the object and the caller has not got the pointer yet), the
//!   history starts: the allocating CPU points its registers at the object's ranges at once,
//!   and every other online CPU is asked to through a preallocated `call_single_data`
//!   (`smp_call_function_single_async`, usable with interrupts off). Those CPUs watch from the
//!   moment their IPI runs: a [`abi::HistoryArm`] record says when, so the window in which
//!   their accesses could be missed is measured, not guessed.
//! - A trap records the registers and the trap ip (the instruction after the access).
//! - The free tracepoint ends the history (it fires before the allocator reuses the memory):
//!   the freeing CPU points its registers back at the dummy, the others are asked to, and
//!   traps from then on are counted as stray, not recorded, so no access to a later object at
//!   that address is ever attributed to this one. Objects freed without a tracepoint
//!   (bulk frees) end when their address is allocated again or at the plan's timeout.
//! - At stop, every CPU is re-pointed synchronously (`on_each_cpu`) and the breakpoints are
//!   unregistered.
//! - perf drops a CPU's breakpoints when it goes offline and never schedules them again: when
//!   it comes back during a collection, the hotplug callback ([`cpu_online`]) makes its events
//!   anew and points it at the running history's object.
//!
//! One history runs at a time: that keeps the state one small set of atomics shared by the
//! probes, the IPIs and the #DB handler, none of which may take a lock.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::alloc::KVVec;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

use crate::abi;
use crate::debugreg::{Condition, Dr7, Length, Slot};
use crate::ffi::{self, HitRegs};
use crate::lookup;
use crate::sink::RecordSink;

/// Addresses the breakpoints watch while no history runs: never accessed.
#[repr(C, align(64))]
struct DummyWatch([u64; abi::HISTORY_RANGES]);
static DUMMY_WATCH: DummyWatch = DummyWatch([0; abi::HISTORY_RANGES]);

fn dummy_address(range: usize) -> u64 {
    core::ptr::addr_of!(DUMMY_WATCH.0[range]) as u64
}

/// Distinct caches [`Histories::caches`] holds at most.
const PREFILTER_CACHES: usize = 8;

/// The distinct caches of `targets`, zero-padded; `None` when there are more than
/// [`PREFILTER_CACHES`].
fn distinct_caches(targets: &[Target]) -> Option<[u64; PREFILTER_CACHES]> {
    let mut caches = [0u64; PREFILTER_CACHES];
    let mut n = 0;
    for t in targets {
        if !caches[..n].contains(&t.cache) {
            *caches.get_mut(n)? = t.cache;
            n += 1;
        }
    }
    Some(caches)
}

/// No history running; one may start.
const IDLE: u32 = 0;
/// A CPU is starting or ending a history.
const BUSY: u32 = 1;
/// A history is running.
const ACTIVE: u32 = 2;

/// A plan target with its cache found.
#[derive(Clone, Copy)]
struct Target {
    cache: u64,
    site_start: u64,
    site_end: u64,
    ranges: [abi::WatchRange; abi::HISTORY_RANGES],
}

impl Target {
    fn matches(&self, cache: u64, call_site: u64) -> bool {
        cache == self.cache
            && (self.site_end == 0 || (self.site_start..self.site_end).contains(&call_site))
    }
}

/// What one CPU's debug registers watch.
struct CpuWatch {
    /// The history they point at; 0: the dummy.
    history: AtomicU64,
}

/// Context of one range's breakpoint, handed to perf for its #DB callbacks.
struct SlotContext {
    histories: *const Histories,
    range: u8,
}

/// The history engine of one session. Lives in a KBox inside the session that owns the
/// [`RecordSink`] it writes to; its address is the context of the breakpoints and IPIs.
pub(crate) struct Histories {
    sink: *const RecordSink,
    /// In plan order: `HistoryStart.target` indexes it.
    targets: KVVec<Target>,
    /// The distinct caches of `targets` (up to [`PREFILTER_CACHES`]; `None` beyond): most
    /// allocations are of other caches, and this turns them away without a walk of every
    /// target.
    caches: Option<[u64; PREFILTER_CACHES]>,
    /// Where the next search for a target starts: after the last one started, so that targets
    /// of one type take turns.
    cursor: AtomicUsize,
    /// Ranges per history: breakpoints to register.
    ranges_used: usize,
    timeout_ns: u64,
    /// Least time between two histories, and between two of one target.
    gap_ns: u64,
    target_gap_ns: u64,
    max_hits: u32,

    state: AtomicU32,
    stopping: AtomicBool,
    /// The history every CPU should watch (0: none). Written last when a history starts, first
    /// when it ends; the fields below describe it.
    desired: AtomicU64,
    object: AtomicU64,
    target: AtomicU32,
    start_ns: AtomicU64,
    /// Traps on the running history (recorded or not).
    hit_attempts: AtomicU32,
    hits_recorded: AtomicU32,
    next_history: AtomicU64,
    next_start_ns: AtomicU64,
    target_next_ns: KVVec<AtomicU64>,
    started: AtomicU64,
    stray: AtomicU64,

    cpus: KVec<CpuWatch>,
    /// Per range: the wide breakpoint's per-CPU events (null until `start`).
    breakpoints: [AtomicPtr<c_void>; abi::HISTORY_RANGES],
    slot_contexts: [SlotContext; abi::HISTORY_RANGES],
    /// Per-CPU `call_single_data` for re-pointing other CPUs (null until `start`).
    csd: AtomicPtr<c_void>,
}

// SAFETY: the raw pointers are the owning session's sink (which outlives this), perf events
// and per-CPU memory owned by this object; all shared state is atomic.
unsafe impl Send for Histories {}
// SAFETY: see Send.
unsafe impl Sync for Histories {}

impl Histories {
    /// A history engine for `plan`, writing to `sink`, whose caches are looked up now
    /// (process context). ENOENT when a cache does not exist, EINVAL when a range lies
    /// beyond its objects, ENOTSUPP when caches cannot be listed.
    pub(crate) fn new(
        sink: &RecordSink,
        plan: &abi::HistoryPlan,
        targets: &[abi::HistoryTarget],
    ) -> Result<KBox<Self>> {
        let mut found_targets = KVVec::with_capacity(targets.len(), GFP_KERNEL)?;
        let mut ranges_used = 1;
        for t in targets {
            let found = lookup::find_cache(t.name_bytes())?;
            for r in t.ranges.iter().filter(|r| r.len != 0) {
                if u64::from(r.offset) + u64::from(r.len) > u64::from(found.object_size) {
                    return Err(EINVAL);
                }
            }
            // The ABI keeps the used ranges first.
            ranges_used = ranges_used.max(t.ranges.iter().filter(|r| r.len != 0).count());
            found_targets.push(
                Target {
                    cache: found.cache as u64,
                    site_start: t.site_start,
                    site_end: t.site_end,
                    ranges: t.ranges,
                },
                GFP_KERNEL,
            )?;
        }
        let mut target_next_ns = KVVec::with_capacity(targets.len(), GFP_KERNEL)?;
        for _ in targets {
            target_next_ns.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        let caches = distinct_caches(&found_targets);
        let cpus_n = ffi::nr_cpu_ids();
        let mut cpus = KVec::with_capacity(cpus_n, GFP_KERNEL)?;
        for _ in 0..cpus_n {
            cpus.push(
                CpuWatch {
                    history: AtomicU64::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        let gap_ns = 1_000_000_000 / u64::from(plan.max_per_sec.max(1));
        let target_count = found_targets.len();
        let mut this = KBox::new(
            Self {
                sink: core::ptr::from_ref(sink),
                targets: found_targets,
                caches,
                cursor: AtomicUsize::new(0),
                ranges_used,
                timeout_ns: u64::from(plan.timeout_ms) * 1_000_000,
                gap_ns,
                // Each target gets its share of the rate, so a frequent type cannot starve
                // a rare one.
                target_gap_ns: gap_ns * target_count as u64,
                max_hits: plan.max_hits,
                state: AtomicU32::new(IDLE),
                stopping: AtomicBool::new(false),
                desired: AtomicU64::new(0),
                object: AtomicU64::new(0),
                target: AtomicU32::new(0),
                start_ns: AtomicU64::new(0),
                hit_attempts: AtomicU32::new(0),
                hits_recorded: AtomicU32::new(0),
                next_history: AtomicU64::new(1),
                next_start_ns: AtomicU64::new(0),
                target_next_ns,
                started: AtomicU64::new(0),
                stray: AtomicU64::new(0),
                cpus,
                breakpoints: [const { AtomicPtr::new(core::ptr::null_mut()) }; abi::HISTORY_RANGES],
                slot_contexts: core::array::from_fn(|range| SlotContext {
                    histories: core::ptr::null(),
                    range: range as u8,
                }),
                csd: AtomicPtr::new(core::ptr::null_mut()),
            },
            GFP_KERNEL,
        )?;
        let me = core::ptr::from_ref::<Self>(&this);
        for ctx in &mut this.slot_contexts {
            ctx.histories = me;
        }
        Ok(this)
    }

    /// Reserves the debug registers on every CPU. Process context. On failure nothing stays
    /// reserved (ENOSPC: another user holds the debug registers).
    pub(crate) fn start(&self) -> Result {
        // A start that failed earlier shut the engine down; this one starts afresh.
        self.stopping.store(false, Ordering::SeqCst);
        let me = core::ptr::from_ref::<Self>(self)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `sync_this_cpu` gets `me` back; this object outlives the csd (freed in
        // `shutdown`, which drains it first).
        let csd = unsafe { ffi::dprof_shim_csd_alloc(sync_this_cpu, me) };
        if csd.is_null() {
            return Err(ENOMEM);
        }
        self.csd.store(csd, Ordering::Release);
        for range in 0..self.ranges_used {
            let ctx = core::ptr::from_ref(&self.slot_contexts[range])
                .cast_mut()
                .cast::<c_void>();
            // SAFETY: process context; `ctx` lives in this object, which unregisters the
            // breakpoints (waiting for their handlers) before it is dropped.
            let events = unsafe { ffi::dprof_shim_bp_register(dummy_address(range) as _, ctx) };
            let addr = events as usize;
            if events.is_null() || addr >= (-4095isize) as usize {
                self.release();
                return Err(if events.is_null() {
                    ENOMEM
                } else {
                    Error::from_errno(addr as isize as i32)
                });
            }
            self.breakpoints[range].store(events, Ordering::Release);
        }
        // A CPU that came online between the registration and this misses its breakpoints
        // (as one offline at start): registering takes the hotplug lock itself.
        // SAFETY: process context.
        unsafe { ffi::dprof_shim_cpus_read_lock() };
        HOTPLUG_HISTORIES.store(
            core::ptr::from_ref::<Self>(self).cast_mut(),
            Ordering::Release,
        );
        // SAFETY: taken above.
        unsafe { ffi::dprof_shim_cpus_read_unlock() };
        Ok(())
    }

    /// Unregisters the breakpoints and frees the csd. Process context; every CPU must point
    /// at the dummy already (or never have been re-pointed).
    fn release(&self) {
        // SAFETY: process context.
        unsafe { ffi::dprof_shim_cpus_read_lock() };
        let _ = HOTPLUG_HISTORIES.compare_exchange(
            core::ptr::from_ref::<Self>(self).cast_mut(),
            core::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        // SAFETY: taken above.
        unsafe { ffi::dprof_shim_cpus_read_unlock() };
        for events in &self.breakpoints {
            let events = events.swap(core::ptr::null_mut(), Ordering::AcqRel);
            if !events.is_null() {
                // SAFETY: registered in `start`; unregistering waits for running handlers.
                unsafe { ffi::dprof_shim_bp_unregister(events) };
            }
        }
        let csd = self.csd.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !csd.is_null() {
            // SAFETY: allocated in `start`; the caller drained it.
            unsafe { ffi::dprof_shim_csd_free(csd) };
        }
    }

    /// Ends the running history (reason "stopped"), points every CPU back at the dummy,
    /// waiting for all of them, and releases the debug registers. Process context, after the
    /// slab probes are detached (so no history can start any more).
    pub(crate) fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        // A start or end in flight on another CPU finishes in microseconds.
        while self.state.load(Ordering::Acquire) == BUSY {
            core::hint::spin_loop();
        }
        let me = core::ptr::from_ref::<Self>(self)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `end_stopped` gets `me` back during the call.
        unsafe { ffi::dprof_shim_preempt_off(end_stopped, me) };
        let csd = self.csd.load(Ordering::Acquire);
        if !csd.is_null() {
            // SAFETY: allocated in `start`. After the drain no request is queued; one may have
            // started, and it finishes before this CPU's on_each_cpu request runs there (the
            // queue is flushed in order with interrupts off).
            unsafe { ffi::dprof_shim_csd_drain(csd) };
            // SAFETY: process context; `sync_this_cpu` reads `desired`, now 0.
            unsafe { ffi::dprof_shim_on_each_cpu(sync_this_cpu, me) };
        }
        if self.armed_slots() != 0 {
            pr_err!("a debug register still watches an object after stop\n");
        }
        self.release();
    }

    /// (CPU, range) pairs watching an object now.
    pub(crate) fn armed_slots(&self) -> u32 {
        let armed = self
            .cpus
            .iter()
            .filter(|c| c.history.load(Ordering::Relaxed) != 0)
            .count();
        (armed * self.ranges_used) as u32
    }

    /// Debug registers reserved per CPU.
    pub(crate) fn reserved_slots(&self) -> u32 {
        self.breakpoints
            .iter()
            .filter(|b| !b.load(Ordering::Relaxed).is_null())
            .count() as u32
    }

    /// Histories started so far.
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Traps not recorded because no history of that CPU's registers was running.
    pub(crate) fn stray_hits(&self) -> u64 {
        self.stray.load(Ordering::Relaxed)
    }

    fn sink(&self) -> &RecordSink {
        // SAFETY: the sink belongs to the session that owns this object, and outlives it.
        unsafe { &*self.sink }
    }

    /// The slab allocation probe: ends a history whose object was reallocated or has timed
    /// out, and starts one when this object is planned and the rate allows. Preemption off.
    pub(crate) fn on_alloc(&self, ptr: u64, cache: u64, call_site: u64) {
        if self.stopping.load(Ordering::Relaxed) {
            return;
        }
        let now = ffi::now_ns();
        match self.state.load(Ordering::Acquire) {
            ACTIVE => {
                if self.object.load(Ordering::Relaxed) == ptr {
                    self.end(abi::HISTORY_END_REALLOCATED, 0, now);
                } else {
                    self.check_timeout(now);
                }
                if self.state.load(Ordering::Acquire) != IDLE {
                    return;
                }
            }
            IDLE => {}
            _ => return,
        }
        if now < self.next_start_ns.load(Ordering::Relaxed) {
            return;
        }
        if self.caches.is_some_and(|caches| !caches.contains(&cache)) {
            return;
        }
        let count = self.targets.len();
        let first = self.cursor.load(Ordering::Relaxed) % count.max(1);
        let Some(t) = (0..count).map(|k| (first + k) % count).find(|&i| {
            self.targets[i].matches(cache, call_site)
                && now >= self.target_next_ns[i].load(Ordering::Relaxed)
        }) else {
            return;
        };
        if self
            .state
            .compare_exchange(IDLE, BUSY, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.begin(t, ptr, cache, call_site, now);
        self.state.store(ACTIVE, Ordering::Release);
    }

    /// `cache` is being destroyed: its targets never start a history again. A cache created
    /// later may take its address, and its objects are not what the plan named. A history
    /// running on one of its objects has ended already: every object is freed before
    /// `kmem_cache_destroy`. Process context.
    pub(crate) fn forget_cache(&self, cache: u64) {
        for (target, next) in self.targets.iter().zip(self.target_next_ns.iter()) {
            if target.cache == cache {
                next.store(u64::MAX, Ordering::Release);
            }
        }
    }

    /// Starts a history of target `t` on object `ptr`. The caller holds BUSY.
    fn begin(&self, t: usize, ptr: u64, cache: u64, call_site: u64, now: u64) {
        let Some(&target) = self.targets.get(t) else {
            return;
        };
        self.cursor.store(t + 1, Ordering::Relaxed);
        let history = self.next_history.fetch_add(1, Ordering::Relaxed);
        self.object.store(ptr, Ordering::Relaxed);
        self.target.store(t as u32, Ordering::Relaxed);
        self.start_ns.store(now, Ordering::Relaxed);
        self.hit_attempts.store(0, Ordering::Relaxed);
        self.hits_recorded.store(0, Ordering::Relaxed);
        self.desired.store(history, Ordering::Release);
        self.started.fetch_add(1, Ordering::Relaxed);

        let mut payload = [0u8; abi::HistoryStart::SIZE];
        abi::HistoryStart {
            history,
            object: ptr,
            cache,
            call_site,
            target: t as u32,
            ranges: target.ranges,
        }
        .encode(&mut payload);
        self.sink().emit(abi::RecordKind::HistoryStart, &payload);
        let here = ffi::this_cpu();
        self.point_this_cpu(here, history, Some((ptr, &target.ranges)));
        self.emit_arm(history, ffi::now_ns().wrapping_sub(now));
        self.kick_other_cpus(here);
    }

    /// Ends the running history if it is past the plan's timeout. Preemption off.
    pub(crate) fn check_timeout(&self, now: u64) {
        if self.state.load(Ordering::Acquire) == ACTIVE
            && now.wrapping_sub(self.start_ns.load(Ordering::Relaxed)) > self.timeout_ns
        {
            self.end(abi::HISTORY_END_TIMEOUT, 0, now);
        }
    }

    /// The slab free probe: ends the history of this object. Preemption off.
    pub(crate) fn on_free(&self, ptr: u64, call_site: u64) {
        if self.state.load(Ordering::Acquire) == ACTIVE
            && self.object.load(Ordering::Relaxed) == ptr
        {
            self.end(abi::HISTORY_END_FREED, call_site, ffi::now_ns());
        }
    }

    /// Ends the running history, if one runs and no other CPU is ending it. Preemption off.
    fn end(&self, reason: u32, call_site: u64, now: u64) {
        if self
            .state
            .compare_exchange(ACTIVE, BUSY, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let history = self.desired.swap(0, Ordering::AcqRel);
        let attempts = self.hit_attempts.load(Ordering::Relaxed);
        let recorded = self.hits_recorded.load(Ordering::Relaxed);
        let t = self.target.load(Ordering::Relaxed) as usize;
        let mut payload = [0u8; abi::HistoryEnd::SIZE];
        abi::HistoryEnd {
            history,
            object: self.object.load(Ordering::Relaxed),
            call_site,
            reason,
            hits: recorded,
            dropped_hits: attempts.saturating_sub(recorded),
            lifetime_ns: now.wrapping_sub(self.start_ns.load(Ordering::Relaxed)),
        }
        .encode(&mut payload);
        self.sink().emit(abi::RecordKind::HistoryEnd, &payload);
        let here = ffi::this_cpu();
        self.point_this_cpu(here, 0, None);
        self.kick_other_cpus(here);
        self.next_start_ns
            .store(now.wrapping_add(self.gap_ns), Ordering::Relaxed);
        if let Some(next) = self.target_next_ns.get(t) {
            // A target whose cache was destroyed stays stopped (see `forget_cache`).
            let _ = next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |at| {
                (at != u64::MAX).then_some(now.wrapping_add(self.target_gap_ns))
            });
        }
        self.state.store(IDLE, Ordering::Release);
    }

    fn kick_other_cpus(&self, here: usize) {
        let csd = self.csd.load(Ordering::Acquire);
        if csd.is_null() {
            return;
        }
        for cpu in 0..self.cpus.len() {
            // SAFETY: reads the online mask.
            if cpu == here || !unsafe { ffi::dprof_shim_cpu_online(cpu as u32) } {
                continue;
            }
            // SAFETY: the csd was allocated in `start` and lives until `shutdown` drains it.
            // An error (the CPU went offline) leaves that CPU on the dummy; its breakpoint
            // went away with it.
            let _ = unsafe { ffi::dprof_shim_csd_kick(csd, cpu as c_int) };
        }
    }

    /// Points this CPU's registers at `watch` (object and ranges) for `history`, or at the
    /// dummies. Preemption off.
    fn point_this_cpu(
        &self,
        here: usize,
        history: u64,
        watch: Option<(u64, &[abi::WatchRange; abi::HISTORY_RANGES])>,
    ) {
        for range in 0..self.ranges_used {
            let events = self.breakpoints[range].load(Ordering::Acquire);
            if events.is_null() {
                continue;
            }
            let (address, len) = match watch {
                Some((object, ranges)) if ranges[range].len != 0 => (
                    object.wrapping_add(u64::from(ranges[range].offset)),
                    ranges[range].len,
                ),
                _ => (dummy_address(range), 8),
            };
            // SAFETY: reads this CPU's debug registers; preemption is off.
            let slot = unsafe { ffi::dprof_shim_bp_slot(events) };
            let Ok(slot) = Slot::new(slot as u8) else {
                continue; // this CPU has no event (it was offline at start)
            };
            // SAFETY: reads this CPU's DR7 shadow.
            let shadow = unsafe { ffi::dprof_shim_dr7_shadow() };
            let (Ok(dr7), Ok(length)) = (
                Dr7::from_bits(shadow as u64),
                Length::from_bytes(u64::from(len)),
            ) else {
                continue;
            };
            let Ok(dr7) = dr7.set(slot, Condition::ReadWrite, length) else {
                continue;
            };
            // SAFETY: `slot` holds this CPU's event of `events`; interrupts are disabled
            // inside while the registers change.
            unsafe {
                ffi::dprof_shim_bp_point(
                    events,
                    c_int::from(slot.get()),
                    address as _,
                    len,
                    dr7.bits() as _,
                )
            };
        }
        if let Some(cpu) = self.cpus.get(here) {
            cpu.history.store(history, Ordering::Release);
        }
    }

    fn emit_arm(&self, history: u64, delay_ns: u64) {
        let mut payload = [0u8; abi::HistoryArm::SIZE];
        abi::HistoryArm { history, delay_ns }.encode(&mut payload);
        self.sink().emit(abi::RecordKind::HistoryArm, &payload);
    }

    /// Makes this CPU watch what `desired` says. Interrupts off (IPI, on_each_cpu).
    fn sync(&self) {
        let here = ffi::this_cpu();
        // A consistent (history, object, target): re-read if a history changed meanwhile.
        let (history, object, target) = loop {
            let h = self.desired.load(Ordering::Acquire);
            let object = self.object.load(Ordering::Relaxed);
            let target = self.target.load(Ordering::Relaxed) as usize;
            if self.desired.load(Ordering::Acquire) == h {
                break (h, object, target);
            }
        };
        let current = self
            .cpus
            .get(here)
            .map(|c| c.history.load(Ordering::Relaxed));
        if current == Some(history) {
            return;
        }
        let ranges = self.targets.get(target).map(|t| t.ranges);
        match ranges {
            Some(ranges) if history != 0 => {
                self.point_this_cpu(here, history, Some((object, &ranges)));
                let start = self.start_ns.load(Ordering::Relaxed);
                self.emit_arm(history, ffi::now_ns().wrapping_sub(start));
            }
            _ => self.point_this_cpu(here, 0, None),
        }
    }

    /// A trap of `range`'s breakpoint on this CPU. #DB context.
    fn hit(&self, range: u8, regs: &HitRegs) {
        let here = ffi::this_cpu();
        let watching = self
            .cpus
            .get(here)
            .map_or(0, |c| c.history.load(Ordering::Acquire));
        let running = self.desired.load(Ordering::Acquire);
        if watching == 0 || watching != running || self.state.load(Ordering::Acquire) != ACTIVE {
            self.stray.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let seq = self.hit_attempts.fetch_add(1, Ordering::Relaxed);
        if seq >= self.max_hits {
            return;
        }
        let mut payload = [0u8; abi::HistoryHit::SIZE];
        abi::HistoryHit {
            history: running,
            ip: regs.ip,
            regs: regs.regs,
            pid: regs.pid,
            tid: regs.tid,
            range,
            flags: if regs.user != 0 { abi::HIT_USER } else { 0 },
            seq,
        }
        .encode(&mut payload);
        if self.sink().emit(abi::RecordKind::HistoryHit, &payload) {
            self.hits_recorded.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The histories of the running collection, for the CPU hotplug callbacks; null when none.
/// Written with the CPU hotplug lock held for reading, read by the callbacks, which run with
/// it held for writing: never both at once.
static HOTPLUG_HISTORIES: AtomicPtr<Histories> = AtomicPtr::new(core::ptr::null_mut());

/// A CPU came online (the hotplug thread, on that CPU): its breakpoints are made anew, and it
/// is pointed at the running history's object, if any.
pub(crate) fn cpu_online(cpu: usize) {
    let histories = HOTPLUG_HISTORIES.load(Ordering::Acquire);
    if histories.is_null() {
        return;
    }
    // SAFETY: HOTPLUG_HISTORIES points at live histories while the hotplug lock is held for
    // writing (see HOTPLUG_HISTORIES).
    let histories = unsafe { &*histories };
    for range in 0..histories.ranges_used {
        let events = histories.breakpoints[range].load(Ordering::Acquire);
        if events.is_null() {
            continue;
        }
        let ctx = core::ptr::from_ref(&histories.slot_contexts[range])
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: process context; `events` is registered until `release`, which cannot run
        // meanwhile (it retracts HOTPLUG_HISTORIES under the hotplug lock first); `ctx` as in `start`.
        let ret = unsafe {
            ffi::dprof_shim_bp_remake(events, cpu as c_int, dummy_address(range) as _, ctx)
        };
        if ret < 0 {
            pr_warn!("no history breakpoint on CPU {cpu} after it came online ({ret})\n");
        }
    }
    if let Some(c) = histories.cpus.get(cpu) {
        c.history.store(0, Ordering::Release);
    }
    let me = core::ptr::from_ref::<Histories>(histories)
        .cast_mut()
        .cast::<c_void>();
    // SAFETY: `sync_this_cpu` gets the live histories back during the call; every CPU that
    // already watches what it should returns at once.
    unsafe { ffi::dprof_shim_on_each_cpu(sync_this_cpu, me) };
}

/// A CPU is going offline: its registers go with it, so it watches nothing.
pub(crate) fn cpu_offline(cpu: usize) {
    let histories = HOTPLUG_HISTORIES.load(Ordering::Acquire);
    if histories.is_null() {
        return;
    }
    // SAFETY: as in cpu_online.
    if let Some(c) = unsafe { &*histories }.cpus.get(cpu) {
        c.history.store(0, Ordering::Release);
    }
}

impl Drop for Histories {
    fn drop(&mut self) {
        // Defensive: stop_session shuts histories down before the session goes.
        if self.reserved_slots() != 0 || !self.csd.load(Ordering::Relaxed).is_null() {
            self.shutdown();
        }
    }
}

/// Called by the shim's breakpoint handler for every trap. #DB context.
#[no_mangle]
extern "C" fn dprof_rs_bp_hit(ctx: *mut c_void, regs: *const HitRegs) {
    // SAFETY: `ctx` is a SlotContext of a Histories that unregisters its breakpoints (waiting
    // for handlers) before it is freed; `regs` points to the handler's stack.
    let (slot, regs) = unsafe { (&*ctx.cast::<SlotContext>(), &*regs) };
    // SAFETY: as above.
    let histories = unsafe { &*slot.histories };
    histories.hit(slot.range, regs);
}

/// The csd / on_each_cpu function: re-point this CPU. Interrupts off.
///
/// # Safety
/// `info` must be a live [`Histories`].
unsafe extern "C" fn sync_this_cpu(info: *mut c_void) {
    // SAFETY: `info` is the Histories whose csd this is; it drains the csd and waits for
    // on_each_cpu before it is freed.
    let histories = unsafe { &*info.cast::<Histories>() };
    histories.sync();
}

/// Ends the running history at stop. Preemption off (it writes to this CPU's ring).
///
/// # Safety
/// `info` must be a live [`Histories`].
unsafe extern "C" fn end_stopped(info: *mut c_void) {
    // SAFETY: `info` is the Histories shutting down, alive during the call.
    let histories = unsafe { &*info.cast::<Histories>() };
    histories.end(abi::HISTORY_END_STOPPED, 0, ffi::now_ns());
}

/// Ends the running history if it timed out: called from read(), so that a history whose
/// object is never freed (or freed without a tracepoint) ends even when nothing of its type is
/// allocated any more. Preemption off.
///
/// # Safety
/// `info` must be a live [`Histories`].
pub(crate) unsafe extern "C" fn check_timeout_now(info: *mut c_void) {
    // SAFETY: `info` is a live Histories for the duration of the call.
    let histories = unsafe { &*info.cast::<Histories>() };
    histories.check_timeout(ffi::now_ns());
}
