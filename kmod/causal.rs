//! Causal experiments: Coz-style virtual speedups of one data type's accesses, and the
//! progress points that measure what they change.
//!
//! # Virtual speedup (Coz, section 3.4)
//! While an experiment runs, the sampler's handler tests every sample in O(1): its ip is in
//! the experiment type's ip set, or (hardware samplers) its data address lies in a slab page
//! of the type's cache. One global delay count and one local count per CPU, in ns:
//!
//! - **Weight.** A sample stands for the time since this CPU's previous sample, not for the
//!   nominal period: under QEMU TCG the cpu-clock timer fires 1.2 to 3x late, and a vCPU the
//!   host did not run for a millisecond or two takes no sample meanwhile, though the code it
//!   was in took that time as the guest sees it. The weight is capped at [`WEIGHT_CAP`]
//!   periods (a CPU back from a stopped timer must not count the whole gap), and time spent
//!   pausing in the handler is not counted. Measured in the selftest's causal workload with a
//!   cap of 4: the types' delays came to a quarter of their share of the time, because the
//!   samples after the host's gaps were cut to the cap.
//! - **A sample of the type** on CPU c adds `weight x speedup / 100` to c's local count and to
//!   the global count: every *other* CPU now owes that delay.
//! - **Pauses.** At each of its samples, a CPU whose local count is behind the global one
//!   pauses for the difference: a busy-wait on the clock in the handler, at most
//!   [`MAX_PAUSE_NS`] at a time (the rest is served at the next samples), and the pause it
//!   actually served (overshoot included) is added to its local count, so an overshoot is
//!   carried forward rather than lost. A pause that served the cap and left debt is counted,
//!   with the largest debt so left (`ExperimentEnd::capped_pauses`,
//!   `max_owed_after_pause_ns`): code that falls behind its delays runs ahead of the slowed
//!   system, and the analysis warns. A hardware sampler's handler runs in NMI, where a
//!   multi-millisecond wait would hold off other NMIs: it queues an irq_work on its CPU,
//!   which serves the pause right after the NMI returns.
//! - **Per task** (the default): the local count that a sample adds to and pays from is the
//!   interrupted task's, kept in a table keyed by the task (tasks.rs), so a task's debt
//!   follows it across CPUs and across sleeps. Coz's rules for suspended threads (section
//!   3.4.1), from three scheduler tracepoints:
//!   - a task woken by an interrupt (a timer, I/O) keeps what it owed while it slept and
//!     serves it when it runs again: the rest of the system was slowed meanwhile, and so
//!     would its wake-up have been;
//!   - a task woken by another task (`sched_waking` in task context) skips the delays
//!     inserted while it was blocked (`sched_switch` records the global count when a task
//!     blocks), up to what the waker has served: the waker has served those delays, so the
//!     wake-up came as late as the slowed system would have made it. What the task owed when
//!     it blocked it still owes: otherwise a task that sleeps often would shed its debt at
//!     every wake-up (measured on `causal-arrival`: the server, woken at each arrival, served
//!     about a sixth of the arrivals' delays). The credit goes to `credited_ns`. Coz makes the
//!     waker serve all it owes before waking; a tracepoint cannot wait there, so the wakee
//!     owes what the waker still owes;
//!   - a forked task (`sched_process_fork`) starts at its parent's count;
//!   - a task switched in (`sched_switch`) after a sleep that no task ended serves the
//!     delays inserted while it slept at once, if they come to at least
//!     [`SWITCH_IN_MIN_OWED_NS`], in an irq_work that runs as soon as the switch has turned
//!     interrupts back on: the slowed system would have woken it that much later. Samples
//!     alone serve a task only when one falls in its run: a task that runs briefly between
//!     sleeps fell behind, and ran ahead of the slowed system (measured on `causal-blocking`:
//!     the sleeper served 94% of the delays, and an off-path type got a slope of +0.05 to
//!     +0.13). Only the sleep's delays, and only for a task seen blocking in the experiment:
//!     everything a task owes, served at each switch-in, made every kernel thread first seen
//!     on the sleeper's CPU burn up to 5 ms there, time the sleeper then lost (its off-path
//!     slope went to -0.14 and -0.18). Not in a plan with an arrival point: there the
//!     arriving task serves at each arrival, which moves its schedule on as a slowed
//!     generator's; served on waking instead, a generator on a schedule of absolute times
//!     caught up at once, and the load came faster in effective time than asked (on
//!     `causal-arrival`, off-path slopes of +0.7 where the server keeps up).
//!
//!   The idle task and the collector's own threads (the process that set the plan) owe
//!   nothing and are never paused, as Coz never delays its profiler thread. A task first seen
//!   in an experiment owes everything inserted since its start. A task the table has no room
//!   for is accounted per CPU (`EXPERIMENT_TASK_TABLE_FULL`).
//! - **Per CPU** (`CAUSAL_PER_CPU_DELAYS`): the count is the CPU's. A CPU whose sample
//!   interrupted the idle task (pid 0) is credited instead of paused: its local count jumps
//!   to the global one and the difference goes to `credited_ns`. That forgives a task woken
//!   by a timer on an idle CPU the delays it owed for its sleep: see the selftest's
//!   `causal-blocking`, where this makes an off-path type look on the path.
//!
//! Everything the handlers touch is atomic, arithmetic wraps, there is no lock and no
//! allocation; the ioctls (under the device mutex) publish changes with release stores and
//! wait for handlers (`synchronize_rcu`, `irq_work_sync`) before anything they read is freed
//! or reused.
//!
//! - **Requests in flight.** With a latency pair in the plan, every delay inserted is also
//!   weighed by the pair's requests in flight at that moment (begin visits less end visits):
//!   the time the pauses stand for is time those requests would not have spent in flight, so
//!   the analysis takes exactly that from the in-flight integral, where scaling it by
//!   `effective / wall` assumed that requests are in flight as often during pauses as
//!   otherwise (not so when the sped-up code is the requests' own).
//!
//! # Progress points
//! Per point: an atomic visit count and an atomic sum of `(visit time - origin)`, both since
//! the plan was set. The kprobe pre-handler and the tracepoint probe do one add each (plus a
//! clock read); user points are counted by write() on /dev/dprof. A sampled point (Coz's
//! sampled progress point) is a function's code range: the sampler's handler counts a
//! visit for each sample whose ip lies in it, a range test per sampled point (at most
//! [`abi::MAX_PROGRESS_POINTS`]), with the clock it has already read. An experiment's visits and
//! time sum are differences of snapshots taken at its start and end.
//!
//! # Arrivals (load amplification)
//! The plan may name one counted point as the arrival point: where requests enter the system.
//! Each of its visits during an experiment does two things, after counting the visit:
//! - **The arriving task serves what it owes first** (task context only; an arrival in an
//!   interrupt comes from outside, and no task brought it). A load generator that sleeps
//!   between arrivals is seldom sampled, so it would otherwise never serve the delays that
//!   a virtual speedup inserts, and its arrivals would come sooner in effective time: the
//!   speedup would also amplify the load. Served here, arrivals keep their pace.
//! - **It inserts the experiment's `arrival_delay_ns`** for every other task (the arriving
//!   one is credited, as the code that runs a sped-up type is): in effective time each gap
//!   between arrivals is that much shorter, so the system is measured as if requests came
//!   faster (Curtsinger's load amplification). An arrival in an interrupt credits nobody.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::alloc::KVVec;
use kernel::ffi::{c_uint, c_void};
use kernel::prelude::*;
use kernel::uaccess::UserSlice;

use crate::abi;
use crate::ffi::{self, KmemCache, Tracepoint};
use crate::lookup;
use crate::sink::RecordSink;
use crate::tasks::{TaskTable, NOT_BLOCKED};

/// Longest pause one sample serves (ns); a larger debt is carried to the next samples.
pub(crate) const MAX_PAUSE_NS: u64 = 5_000_000;

/// Frames of a call chain read at a sample: the handler's own and the interrupt entry's
/// (about ten, more from an NMI) before the sampled code's MAX_CALLER_FRAMES. 384 bytes of
/// the interrupt or NMI stack.
const CHAIN_BUFFER: usize = 48;
const _: () = assert!(CHAIN_BUFFER > abi::MAX_CALLER_FRAMES);

/// A causal scope's ranges: `[start, end)`, sorted, disjoint.
type ScopeRanges = crate::page_sites::CodeRanges;
/// Per task, what a task switched in must owe (ns) to serve it at once rather than at its
/// next sample: a smaller debt is not worth the interrupt.
const SWITCH_IN_MIN_OWED_NS: u64 = 20_000;
/// A sample's weight is at most this many nominal periods (2 ms at the 100 us the tests use).
pub(crate) const WEIGHT_CAP: u64 = 20;
/// Iterations of an empty loop between two clock reads while a CPU pauses: a few hundred
/// ns on hardware, about a microsecond under QEMU's TCG, so the overshoot (carried forward
/// anyway) stays small. TCG serves every guest TSC read of every vCPU under one spin lock
/// (`cpu_get_ticks`, which also writes the last value read); a pause that read the clock
/// at every iteration would hold that lock much of the time, against the other vCPUs'
/// clock reads (every timer interrupt makes several).
const PAUSE_SPINS_PER_CLOCK_READ: u32 = 512;

/// One progress point's counters. A cache line of its own: a hot kprobe's counters should
/// not bounce another point's.
#[repr(align(64))]
struct Point {
    kind: u32,
    name: [u8; abi::PROGRESS_NAME_BYTES],
    /// A sampled point's code range, `[start, end)`; empty for the other kinds.
    start: u64,
    end: u64,
    /// Visits since the plan was set.
    visits: AtomicU64,
    /// Sum over those visits of (visit time - `Causal::origin_ns`), wrapping.
    time_sum: AtomicU64,
}

impl Point {
    fn name_bytes(&self) -> &[u8] {
        abi::until_nul(&self.name)
    }
}

/// The instructions (and slab cache) that count as accesses to one type. Immutable once
/// published.
pub(crate) struct TypeSet {
    /// Open addressing, linear probing; 0 marks an empty slot (no instruction lives at 0).
    /// A power of two at least twice the number of ips, so probes end quickly.
    slots: KVVec<u64>,
    /// Bits of the slot index (`slots.len() == 1 << bits`).
    bits: u32,
    /// Compared with the slab cache of a hardware sample's data address; never dereferenced.
    cache: *const KmemCache,
}

impl TypeSet {
    fn slot_of(ip: u64, bits: u32) -> usize {
        // Fibonacci hashing: the top bits of the product mix every bit of the address.
        (ip.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    fn new(ips: &[u64], cache: *const KmemCache) -> Result<KBox<Self>> {
        let mut bits = 4u32;
        while (1usize << bits) < ips.len().saturating_mul(2) {
            bits += 1;
        }
        let len = 1usize << bits;
        let mut slots = KVVec::from_elem(0u64, len, GFP_KERNEL)?;
        let mask = len - 1;
        for &ip in ips.iter().filter(|&&ip| ip != 0) {
            let mut i = Self::slot_of(ip, bits);
            loop {
                match slots.get_mut(i) {
                    Some(slot) if *slot == ip => break,
                    Some(slot) if *slot == 0 => {
                        *slot = ip;
                        break;
                    }
                    _ => i = (i + 1) & mask,
                }
            }
        }
        Ok(KBox::new(Self { slots, bits, cache }, GFP_KERNEL)?)
    }

    /// The O(1) test of the sampler's handler (at most a few probes: the table is at most
    /// half full).
    fn contains(&self, ip: u64) -> bool {
        if ip == 0 {
            return false;
        }
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = Self::slot_of(ip, self.bits);
        for _ in 0..self.slots.len() {
            match self.slots.get(i) {
                Some(&v) if v == ip => return true,
                Some(&0) | None => return false,
                Some(_) => i = (i + 1) & mask,
            }
        }
        false
    }

    fn matches(&self, ip: u64, data_addr: Option<u64>) -> bool {
        if self.contains(ip) {
            return true;
        }
        match data_addr {
            Some(addr) if !self.cache.is_null() => {
                // SAFETY: the shim checks virt_addr_valid and that the page is a slab before
                // reading its cache; the pointer is only compared.
                let cache = unsafe { ffi::dprof_shim_cache_of(addr as *const c_void) };
                cache == self.cache
            }
            _ => false,
        }
    }
}

/// One CPU's delay state, written only by that CPU's handlers (the sampler and its irq_work,
/// which an NMI may interrupt: hence atomic adds).
#[repr(align(64))]
struct CpuState {
    /// Delay this CPU has served or been credited (ns, wrapping).
    local: AtomicU64,
    /// The experiment `local` belongs to; another one makes the next sample reset it.
    epoch: AtomicU32,
    /// Time of this CPU's previous sample (or the end of its last pause).
    last_ns: AtomicU64,
    /// A pause runs on this CPU: an arrival's pause (interrupts on) that a sample interrupts
    /// must not be served twice, by the sample's handler too.
    pausing: AtomicBool,
    /// What the task just switched in is to serve from the irq_work (its sleep's delays); 0
    /// when the irq_work follows an NMI sample, which serves all that is owed.
    switch_in_owed: AtomicU64,
}

/// What the handlers and probes share; boxed so that its address is stable.
pub(crate) struct Causal {
    points: [Point; abi::MAX_PROGRESS_POINTS],
    point_count: usize,
    /// The arrival point's index, if the plan has one.
    arrival: Option<usize>,
    /// The latency pair's begin and end indices, if the plan has one.
    latency_pair: Option<(usize, usize)>,
    /// The running experiment's delay per arrival (ns).
    arrival_delay: AtomicU64,
    /// Whether any point is sampled: the handler skips the range tests otherwise.
    has_sampled_points: bool,
    record_samples: bool,
    /// The time sums' origin: when the plan was set.
    origin_ns: u64,
    period_ns: u64,
    /// The type table; entries are replaced only while no experiment runs.
    types: [AtomicPtr<TypeSet>; abi::MAX_CAUSAL_TYPES],
    /// The scope's code ranges (IOC_CAUSAL_SCOPE), sorted; null without a scope. Set only
    /// before the sampler starts, freed after it is released.
    scope: AtomicPtr<ScopeRanges>,
    // The running experiment, published by `running` (release) and read after it (acquire).
    running: AtomicBool,
    epoch: AtomicU32,
    speedup: AtomicU32,
    exp_type: AtomicPtr<TypeSet>,
    global_at_start: AtomicU64,
    // Counts that only grow, and only while an experiment runs.
    global: AtomicU64,
    paused: AtomicU64,
    credited: AtomicU64,
    samples: AtomicU64,
    type_samples: AtomicU64,
    /// Sum of each delay times the latency pair's requests in flight (plan-set visits),
    /// wrapping.
    in_flight_delay: AtomicU64,
    capped_pauses: AtomicU64,
    /// The running experiment's largest debt left after a capped pause (reset at each start).
    max_owed_after_pause: AtomicU64,
    cpus: KVec<CpuState>,
    /// Per-task delay counts; None for per-CPU accounting.
    tasks: Option<TaskTable>,
    /// The collector's thread group (the process that set the plan): never paused per task.
    collector_tgid: u32,
    /// A task found no slot in the running experiment (reset at each start).
    table_full: AtomicBool,
    /// Per-CPU irq_work serving the pauses that NMI handlers and (per task) switched-in tasks
    /// owe; null for the software sampler with per-CPU accounting.
    irq_works: AtomicPtr<c_void>,
}

impl Causal {
    pub(crate) fn record_samples(&self) -> bool {
        self.record_samples
    }

    fn visit(&self, point: &Point) {
        self.visit_at(point, ffi::now_ns());
    }

    fn visit_at(&self, point: &Point, now: u64) {
        point.visits.fetch_add(1, Ordering::Relaxed);
        point
            .time_sum
            .fetch_add(now.wrapping_sub(self.origin_ns), Ordering::Relaxed);
    }

    /// A visit of every sampled point whose range holds `ip`. Counted whether or not an
    /// experiment runs, like the probes' visits: the session total counts them all.
    fn visit_sampled(&self, ip: u64, now: u64) {
        if !self.has_sampled_points {
            return;
        }
        for point in self.points.iter().take(self.point_count) {
            // Other kinds' ranges are empty (start == end == 0), so they never hold ip.
            if (point.start..point.end).contains(&ip) {
                self.visit_at(point, now);
            }
        }
    }

    /// Counts a visit of the user point `name`; false when the plan has none of that name.
    /// Process context.
    pub(crate) fn visit_user(&self, name: &[u8]) -> bool {
        let Some(index) = self.points[..self.point_count]
            .iter()
            .position(|p| p.kind == abi::PROGRESS_USER && p.name_bytes() == name)
        else {
            return false;
        };
        self.visit(&self.points[index]);
        if self.arrival == Some(index) {
            let this = core::ptr::from_ref(self).cast_mut().cast::<c_void>();
            // SAFETY: `self` outlives the call, which returns before this function does.
            unsafe { ffi::dprof_shim_preempt_off(arrive_preempt_off, this) };
        }
        true
    }

    /// A kprobe's or tracepoint's visit of point `index` (preemption off).
    fn visit_probe(&self, index: usize) {
        if let Some(point) = self.points.get(index) {
            self.visit(point);
            if self.arrival == Some(index) {
                self.arrive();
            }
        }
    }

    /// A visit of the arrival point, counted already: the arriving task serves what it
    /// owes, then every other task owes the experiment's delay per arrival (see the module's
    /// doc). Preemption off.
    fn arrive(&self) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let Some(cpu) = self.cpus.get(ffi::this_cpu()) else {
            return;
        };
        let epoch = self.epoch.load(Ordering::Relaxed);
        let delay = self.arrival_delay.load(Ordering::Relaxed);
        // In an interrupt no task arrived: nobody is credited.
        if ffi::waker_task().is_some() {
            if let Some(local) = self.account(cpu, false, epoch) {
                let owed = self.owed(local);
                if owed != 0 {
                    self.pause(cpu, local, owed, epoch);
                }
                local.fetch_add(delay, Ordering::Relaxed);
            }
        }
        self.insert_delay(delay);
    }

    /// Every other task (per CPU: CPU) now owes `delay` more. With a latency pair, the delay
    /// is also weighed by the requests in flight now: the pauses it stands for are time those
    /// requests would not have spent in flight.
    fn insert_delay(&self, delay: u64) {
        self.global.fetch_add(delay, Ordering::Relaxed);
        if let Some((begin, end)) = self.latency_pair {
            let visits = |i: usize| self.points[i].visits.load(Ordering::Relaxed);
            // Wrapping: end_experiment moves the origin to the session's start.
            let in_flight = visits(begin).wrapping_sub(visits(end));
            self.in_flight_delay
                .fetch_add(delay.wrapping_mul(in_flight), Ordering::Relaxed);
        }
    }

    /// The sampler's handler, for every sample (hardirq for the software sampler, NMI for a
    /// hardware one: `nmi`). `idle`: the sample interrupted the idle task.
    pub(crate) fn on_sample(&self, ip: u64, data_addr: Option<u64>, idle: bool, nmi: bool) {
        let now = ffi::now_ns();
        let Some(cpu) = self.cpus.get(ffi::this_cpu()) else {
            return;
        };
        let prev = cpu.last_ns.swap(now, Ordering::Relaxed);
        self.visit_sampled(ip, now);
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let epoch = self.epoch.load(Ordering::Relaxed);
        self.samples.fetch_add(1, Ordering::Relaxed);
        let elapsed = now.wrapping_sub(prev);
        let weight = if prev == 0 || elapsed > self.period_ns.saturating_mul(WEIGHT_CAP) {
            // First sample, a clock that went back, or a long gap: at most the cap.
            if prev == 0 || (elapsed as i64) < 0 {
                self.period_ns
            } else {
                self.period_ns.saturating_mul(WEIGHT_CAP)
            }
        } else {
            elapsed
        };
        let local = self.account(cpu, idle, epoch);
        let exp_type = self.exp_type.load(Ordering::Acquire);
        // SAFETY: a type set published as `exp_type` is freed only after the experiment ended
        // and synchronize_rcu() waited for every handler that could have read it (handlers
        // run with interrupts off or in NMI: RCU read-side critical sections).
        if let Some(ty) = unsafe { exp_type.as_ref() } {
            let unit_ip = if idle { Some(ip) } else { self.unit_ip(ip) };
            if unit_ip.is_some_and(|unit_ip| ty.matches(unit_ip, data_addr)) {
                let delay =
                    weight.wrapping_mul(u64::from(self.speedup.load(Ordering::Relaxed))) / 100;
                if let Some(local) = local {
                    local.fetch_add(delay, Ordering::Relaxed);
                }
                self.insert_delay(delay);
                self.type_samples.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Exempt from delays: nothing to pay.
        let Some(local) = local else {
            return;
        };
        let owed = self.owed(local);
        if owed == 0 {
            return;
        }
        if idle {
            // Per CPU only: per task, the idle task is exempt.
            local.fetch_add(owed, Ordering::Relaxed);
            self.credited.fetch_add(owed, Ordering::Relaxed);
        } else if nmi {
            let works = self.irq_works.load(Ordering::Relaxed);
            if !works.is_null() {
                // SAFETY: allocated for the whole session and freed only after
                // irq_work_sync(), once the sampler is released; queueing is NMI-safe.
                unsafe { ffi::dprof_shim_irq_work_queue(works) };
            }
        } else {
            self.pause(cpu, local, owed, epoch);
        }
    }

    /// The address a sample at `ip` counts as for the type test: `ip` itself without a scope
    /// or inside it; outside it, the first return address of the kernel call chain that lies
    /// inside it (the caller in scope of a helper the scope leaves out, as Coz attributes
    /// samples), or None when there is none within MAX_CALLER_FRAMES frames (user code, or
    /// code no function in scope called).
    fn unit_ip(&self, ip: u64) -> Option<u64> {
        // SAFETY: set before the sampler started and freed only after it was released.
        let Some(scope) = (unsafe { self.scope.load(Ordering::Acquire).as_ref() }) else {
            return Some(ip);
        };
        if abi::scope_contains(scope, ip) {
            return Some(ip);
        }
        if (ip as i64) >= 0 {
            return None; // user code: the kernel's unwinder does not walk it
        }
        // This handler's own frames and the interrupt entry's come first (about ten).
        let mut chain = [0u64; CHAIN_BUFFER];
        // SAFETY: `chain` holds CHAIN_BUFFER entries; the unwinder is NMI-safe.
        let n = unsafe { ffi::dprof_shim_stack_trace(chain.as_mut_ptr(), CHAIN_BUFFER as u32) };
        let chain = chain.get(..n as usize)?;
        let sampled = chain.iter().position(|&a| a == ip)?;
        chain
            .get(sampled + 1..)?
            .iter()
            .take(abi::MAX_CALLER_FRAMES)
            // A return address follows its call: the byte before it is the caller's, even
            // when the call ends the caller's code.
            .find(|&&ret| abi::scope_contains(scope, ret.wrapping_sub(1)))
            .copied()
    }

    /// The local count that the running code's delays go to and are paid from, in
    /// experiment `epoch`: its task's, or (per CPU, or with no room in the task table) its
    /// CPU's. None for what owes nothing (per task: the idle task and the collector).
    fn account<'a>(&'a self, cpu: &'a CpuState, idle: bool, epoch: u32) -> Option<&'a AtomicU64> {
        let start = self.global_at_start.load(Ordering::Relaxed);
        if let Some(tasks) = &self.tasks {
            if idle {
                return None;
            }
            let (task, tgid) = ffi::current_task();
            if tgid == self.collector_tgid {
                return None;
            }
            if let Some(slot) = tasks.slot(task, epoch, start) {
                return Some(&slot.local);
            }
            self.table_full.store(true, Ordering::Relaxed);
        }
        if cpu.epoch.load(Ordering::Relaxed) != epoch {
            // This CPU's first sample in the experiment: it owes nothing yet.
            cpu.local.store(start, Ordering::Relaxed);
            cpu.epoch.store(epoch, Ordering::Relaxed);
        }
        Some(&cpu.local)
    }

    /// Delay owed now by the code whose local count is `local`: how far it is behind the
    /// global count.
    fn owed(&self, local: &AtomicU64) -> u64 {
        let lag = self
            .global
            .load(Ordering::Relaxed)
            .wrapping_sub(local.load(Ordering::Relaxed));
        if (lag as i64) > 0 {
            lag
        } else {
            0
        }
    }

    /// Busy-waits up to `owed` (at most MAX_PAUSE_NS) on `cpu`, or until the experiment ends,
    /// and adds what was served to `local`. Interrupts are off, or (an arrival's) preemption
    /// is; a pause never nests in another on its CPU.
    fn pause(&self, cpu: &CpuState, local: &AtomicU64, owed: u64, epoch: u32) {
        if cpu.pausing.swap(true, Ordering::Relaxed) {
            // The pause this interrupted serves the same debt.
            return;
        }
        let want = owed.min(MAX_PAUSE_NS);
        let start = ffi::now_ns();
        let mut now = start;
        while now.wrapping_sub(start) < want
            && self.running.load(Ordering::Relaxed)
            && self.epoch.load(Ordering::Relaxed) == epoch
        {
            // No `pause` (spin_loop): under QEMU's TCG it leaves the translated code for
            // QEMU's outer loop at every iteration, a cost that real hardware does not
            // have. The clock only every PAUSE_SPINS_PER_CLOCK_READ iterations (see there).
            // The wait is bounded by MAX_PAUSE_NS.
            for spin in 0..PAUSE_SPINS_PER_CLOCK_READ {
                core::hint::black_box(spin);
            }
            now = ffi::now_ns();
        }
        let served = now.wrapping_sub(start);
        local.fetch_add(served, Ordering::Relaxed);
        self.paused.fetch_add(served, Ordering::Relaxed);
        if owed > MAX_PAUSE_NS && served >= MAX_PAUSE_NS {
            // Served all one pause may, and still behind: the debt grows faster than the
            // samples can serve it, or was carried in at once.
            self.capped_pauses.fetch_add(1, Ordering::Relaxed);
            self.max_owed_after_pause
                .fetch_max(self.owed(local), Ordering::Relaxed);
        }
        // The pause is not part of the next sample's weight.
        cpu.last_ns.store(now, Ordering::Relaxed);
        cpu.pausing.store(false, Ordering::Relaxed);
    }

    /// The irq_work after an NMI sample or a switch-in: serves what the running code owes.
    fn serve_deferred(&self) {
        let Some(cpu) = self.cpus.get(ffi::this_cpu()) else {
            return;
        };
        // Taken before anything can return: a value left here would cap a later NMI's pause.
        let switch_in = cpu.switch_in_owed.swap(0, Ordering::Relaxed);
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let epoch = self.epoch.load(Ordering::Relaxed);
        // The NMI or the switch-in it follows found the same task running and an account for
        // it; this finds that account again. It never credits: the idle task owes nothing per
        // task (neither queues this for it), and per CPU the NMI credited it instead.
        let Some(local) = self.account(cpu, false, epoch) else {
            return;
        };
        let mut owed = self.owed(local);
        if switch_in != 0 {
            owed = owed.min(switch_in);
        }
        if owed != 0 {
            self.pause(cpu, local, owed, epoch);
        }
    }

    /// What the scheduler probes of per-task accounting start from: the task table, the
    /// experiment's epoch and the global count at its start; none between experiments or per
    /// CPU.
    fn task_probe_context(&self) -> Option<(&TaskTable, u32, u64)> {
        if !self.running.load(Ordering::Acquire) {
            return None;
        }
        let tasks = self.tasks.as_ref()?;
        let epoch = self.epoch.load(Ordering::Relaxed);
        Some((tasks, epoch, self.global_at_start.load(Ordering::Relaxed)))
    }

    /// `sched_waking` (per task): a task waking `wakee` credits it up to its own count.
    fn on_waking(&self, wakee: usize) {
        let Some((tasks, epoch, start)) = self.task_probe_context() else {
            return;
        };
        // Woken by an interrupt: the wakee keeps what it owes. Woken by the collector, which
        // serves no delays: likewise.
        let Some((waker, tgid)) = ffi::waker_task() else {
            return;
        };
        if waker == wakee || tgid == self.collector_tgid {
            return;
        }
        let Some(served) = tasks
            .slot(waker, epoch, start)
            .map(|slot| slot.local.load(Ordering::Relaxed))
        else {
            self.table_full.store(true, Ordering::Relaxed);
            return;
        };
        let Some(slot) = tasks.slot(wakee, epoch, start) else {
            self.table_full.store(true, Ordering::Relaxed);
            return;
        };
        // Counts only grow from 0 during a plan, far below 2^64 ns: no wrapping here, and a
        // task not blocked (NOT_BLOCKED) gets nothing.
        let blocked_at = slot.blocked_at.swap(NOT_BLOCKED, Ordering::Relaxed);
        let inserted = self.global.load(Ordering::Relaxed).min(served);
        let credit = inserted.saturating_sub(blocked_at);
        if credit > 0 {
            slot.local.fetch_add(credit, Ordering::Relaxed);
            self.credited.fetch_add(credit, Ordering::Relaxed);
        }
    }

    /// `sched_switch` (per task): `prev` leaves its CPU; blocking (not preempted, not
    /// runnable), it records the global count, from which its wake-up's credit counts. `next`,
    /// back from a sleep that no task ended, serves the delays inserted meanwhile now if they
    /// come to at least [`SWITCH_IN_MIN_OWED_NS`] (in a plan with no arrival point).
    fn on_switch(&self, preempted: bool, prev: usize, next: usize, prev_state: u32) {
        let Some((tasks, epoch, start)) = self.task_probe_context() else {
            return;
        };
        if !preempted && prev_state != 0 {
            match tasks.slot(prev, epoch, start) {
                Some(slot) => slot
                    .blocked_at
                    .store(self.global.load(Ordering::Relaxed), Ordering::Relaxed),
                None => self.table_full.store(true, Ordering::Relaxed),
            }
        }
        // With an arrival point, the arriving task serves at its arrivals (see the module's
        // doc); the idle task and the collector owe nothing.
        if self.arrival.is_some() {
            return;
        }
        let Some(tgid) = ffi::task_tgid(next) else {
            return;
        };
        if tgid == self.collector_tgid {
            return;
        }
        // Only a task seen in this experiment can have slept in it: no slot is claimed here.
        let Some(slot) = tasks.find(next, epoch) else {
            return;
        };
        // Still set: no task woke it (an interrupt did; a task's wake-up clears it). Equal to
        // the start: never seen blocking.
        let blocked_at = slot.blocked_at.swap(NOT_BLOCKED, Ordering::Relaxed);
        if blocked_at == NOT_BLOCKED || blocked_at <= start {
            return;
        }
        let slept = self
            .global
            .load(Ordering::Relaxed)
            .saturating_sub(blocked_at);
        let owed = self.owed(&slot.local).min(slept);
        let works = self.irq_works.load(Ordering::Relaxed);
        if owed >= SWITCH_IN_MIN_OWED_NS && !works.is_null() {
            if let Some(cpu) = self.cpus.get(ffi::this_cpu()) {
                cpu.switch_in_owed.store(owed, Ordering::Relaxed);
            }
            // SAFETY: allocated for the whole session and freed only after the probes are
            // unregistered and irq_work_sync(); this CPU's work runs once interrupts are on,
            // with `next` running.
            unsafe { ffi::dprof_shim_irq_work_queue(works) };
        }
    }

    /// `sched_process_fork` (per task), in the parent: the child starts at the parent's
    /// count, or at the global count when the collector forks it (a command it runs).
    fn on_fork(&self, parent: usize, child: usize) {
        let Some((tasks, epoch, start)) = self.task_probe_context() else {
            return;
        };
        let (_, tgid) = ffi::current_task();
        let count = if tgid == self.collector_tgid {
            self.global.load(Ordering::Relaxed)
        } else if let Some(slot) = tasks.slot(parent, epoch, start) {
            slot.local.load(Ordering::Relaxed)
        } else {
            self.table_full.store(true, Ordering::Relaxed);
            return;
        };
        // The child's address may be a dead task's, whose slot is then renewed here.
        match tasks.slot(child, epoch, start) {
            Some(slot) => {
                slot.local.store(count, Ordering::Relaxed);
                // Woken as new (sched_wakeup_new), never by sched_waking.
                slot.blocked_at.store(NOT_BLOCKED, Ordering::Relaxed);
            }
            None => self.table_full.store(true, Ordering::Relaxed),
        }
    }
}

/// The `sched_waking` probe of per-task accounting; the tracepoint's prototype is
/// `(void *data, struct task_struct *p)`, from the waking context.
///
/// # Safety
/// `data` must be the live [`Causal`] the probe was registered with.
unsafe extern "C" fn probe_sched_waking(data: *mut c_void, wakee: *mut c_void) {
    // SAFETY: unregistered, and tracepoint_synchronize_unregister() run, before the Causal is
    // freed (CausalSession's Drop).
    let causal = unsafe { &*data.cast::<Causal>() };
    causal.on_waking(wakee as usize);
}

/// The `sched_process_fork` probe of per-task accounting: `(void *data, struct task_struct
/// *parent, struct task_struct *child)`, in the parent.
///
/// # Safety
/// As for [`probe_sched_waking`].
unsafe extern "C" fn probe_sched_process_fork(
    data: *mut c_void,
    parent: *mut c_void,
    child: *mut c_void,
) {
    // SAFETY: as for probe_sched_waking.
    let causal = unsafe { &*data.cast::<Causal>() };
    causal.on_fork(parent as usize, child as usize);
}

/// The `sched_switch` probe of per-task accounting: `(void *data, bool preempt, struct
/// task_struct *prev, struct task_struct *next, unsigned int prev_state)`, with the run
/// queue locked and interrupts off.
///
/// # Safety
/// As for [`probe_sched_waking`].
unsafe extern "C" fn probe_sched_switch(
    data: *mut c_void,
    preempt: bool,
    prev: *mut c_void,
    next: *mut c_void,
    prev_state: c_uint,
) {
    // SAFETY: as for probe_sched_waking.
    let causal = unsafe { &*data.cast::<Causal>() };
    causal.on_switch(preempt, prev as usize, next as usize, prev_state);
}

/// The scheduler tracepoints of per-task accounting, with their probes.
fn sched_probes() -> [(&'static [u8], *mut c_void); 3] {
    [
        (b"sched_waking", probe_sched_waking as *mut c_void),
        (
            b"sched_process_fork",
            probe_sched_process_fork as *mut c_void,
        ),
        (b"sched_switch", probe_sched_switch as *mut c_void),
    ]
}

/// The irq_work after an NMI sample of a hardware sampler, or (per task) after a switch to a
/// task that owes.
///
/// # Safety
/// `data` must be the live [`Causal`] the works were allocated with.
unsafe extern "C" fn causal_irq_work(data: *mut c_void) {
    // SAFETY: `data` is the Causal the works were allocated with; they are synced and freed
    // before it (CausalSession's Drop).
    let causal = unsafe { &*data.cast::<Causal>() };
    causal.serve_deferred();
}

/// The kprobe pre-handler's callback (dprof_shim.c): one visit.
#[no_mangle]
extern "C" fn dprof_rs_progress_visit(data: *mut c_void) {
    // SAFETY: `data` is the ProbeData the kprobe was registered with; kprobes are unregistered
    // (which waits for running handlers) before it is freed.
    let probe = unsafe { &*data.cast::<ProbeData>() };
    probe.visit();
}

/// A tracepoint probe that ignores the tracepoint's arguments: every tracepoint calls its
/// probes as `probe(data, args...)`, and this one declares only `data`.
///
/// That is sound on x86-64 without kCFI: the System V calling convention passes the first six
/// arguments in registers and the rest on the stack, cleaned up by the caller, so a callee
/// that declares fewer parameters never reads the others and leaves the stack as the caller
/// expects. With `CONFIG_CFI_CLANG` (kCFI, and FineIBT on top of it) the indirect call checks
/// the callee's type hash against the tracepoint's prototype and would trap here; a kernel
/// with it needs one probe per tracepoint prototype.
///
/// # Safety
/// `data` must be a live [`ProbeData`].
unsafe extern "C" fn tracepoint_visit(data: *mut c_void) {
    // SAFETY: `data` is the ProbeData registered with this probe; it is unregistered and
    // tracepoint_synchronize_unregister() has run before it is freed.
    let probe = unsafe { &*data.cast::<ProbeData>() };
    probe.visit();
}

/// What a kprobe or tracepoint probe gets as `data`: the shared state and its point's index.
struct ProbeData {
    causal: *const Causal,
    index: usize,
}

impl ProbeData {
    fn visit(&self) {
        // SAFETY: the Causal outlives its probes (CausalSession's Drop unregisters first).
        let causal = unsafe { &*self.causal };
        causal.visit_probe(self.index);
    }
}

/// [`Causal::arrive`] for a user point's write(), through `dprof_shim_preempt_off`.
///
/// # Safety
/// `data` must be a live [`Causal`].
unsafe extern "C" fn arrive_preempt_off(data: *mut c_void) {
    // SAFETY: the caller (visit_user) holds the Causal for the call's length.
    let causal = unsafe { &*data.cast::<Causal>() };
    causal.arrive();
}

/// A registered probe: a kernel progress point's, or a scheduler tracepoint's.
enum Probe {
    Kprobe(*mut c_void),
    /// The tracepoint and the probe function registered on it.
    Tracepoint(*mut Tracepoint, *mut c_void),
}

/// Snapshot of the counts when an experiment started.
struct ExperimentBase {
    control: abi::ExperimentControl,
    start_ns: u64,
    global: u64,
    paused: u64,
    credited: u64,
    samples: u64,
    type_samples: u64,
    in_flight_delay: u64,
    capped_pauses: u64,
    visits: [u64; abi::MAX_PROGRESS_POINTS],
    time_sums: [u64; abi::MAX_PROGRESS_POINTS],
}

/// A causal plan: the shared counters, the probes feeding them, and the experiment
/// bookkeeping that only the ioctls (under the device mutex) touch.
pub(crate) struct CausalSession {
    shared: KBox<Causal>,
    /// The probes' `data`, one per point; boxed so their addresses are stable.
    probe_data: KVec<KBox<ProbeData>>,
    probes: KVec<(Probe, *mut c_void)>,
    /// Visits of each point when collection started (`total` counts from there).
    session_base: [u64; abi::MAX_PROGRESS_POINTS],
    experiment: Option<ExperimentBase>,
    types_set: u32,
}

// SAFETY: the raw pointers are kernel objects (kprobes, tracepoints, per-CPU works) handed
// back to their APIs from process context, and boxes this struct owns.
unsafe impl Send for CausalSession {}

impl CausalSession {
    /// Sets up the plan's points and registers its kprobes and tracepoint probes. On failure
    /// nothing stays registered: ENOENT for an unknown function or tracepoint, EINVAL for a
    /// function kprobes refuse (blacklisted, not a function start).
    pub(crate) fn new(
        plan: &abi::CausalPlan,
        period_ns: u64,
        hardware: bool,
    ) -> Result<KBox<Self>> {
        let cpus_n = ffi::nr_cpu_ids();
        let mut cpus = KVec::with_capacity(cpus_n, GFP_KERNEL)?;
        for _ in 0..cpus_n {
            cpus.push(
                CpuState {
                    local: AtomicU64::new(0),
                    epoch: AtomicU32::new(0),
                    last_ns: AtomicU64::new(0),
                    pausing: AtomicBool::new(false),
                    switch_in_owed: AtomicU64::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        let tasks = if plan.flags & abi::CAUSAL_PER_CPU_DELAYS == 0 {
            Some(TaskTable::new()?)
        } else {
            None
        };
        let points = core::array::from_fn(|i| {
            let p = plan.points.get(i).copied().unwrap_or_default();
            Point {
                kind: p.kind,
                name: p.name,
                start: p.start,
                end: p.end,
                visits: AtomicU64::new(0),
                time_sum: AtomicU64::new(0),
            }
        });
        let shared = KBox::new(
            Causal {
                points,
                point_count: plan.used_points().len(),
                arrival: plan.arrival_index(),
                latency_pair: plan.latency_pair(),
                arrival_delay: AtomicU64::new(0),
                has_sampled_points: plan
                    .used_points()
                    .iter()
                    .any(|p| p.kind == abi::PROGRESS_SAMPLED),
                record_samples: plan.flags & abi::CAUSAL_RECORD_SAMPLES != 0,
                origin_ns: ffi::now_ns(),
                period_ns: period_ns.max(1),
                types: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
                scope: AtomicPtr::new(core::ptr::null_mut()),
                running: AtomicBool::new(false),
                epoch: AtomicU32::new(0),
                speedup: AtomicU32::new(0),
                exp_type: AtomicPtr::new(core::ptr::null_mut()),
                global_at_start: AtomicU64::new(0),
                global: AtomicU64::new(0),
                paused: AtomicU64::new(0),
                credited: AtomicU64::new(0),
                samples: AtomicU64::new(0),
                type_samples: AtomicU64::new(0),
                in_flight_delay: AtomicU64::new(0),
                capped_pauses: AtomicU64::new(0),
                max_owed_after_pause: AtomicU64::new(0),
                cpus,
                tasks,
                collector_tgid: ffi::current_task().1,
                table_full: AtomicBool::new(false),
                irq_works: AtomicPtr::new(core::ptr::null_mut()),
            },
            GFP_KERNEL,
        )?;
        let mut session = KBox::new(
            Self {
                shared,
                probe_data: KVec::new(),
                probes: KVec::new(),
                session_base: [0; abi::MAX_PROGRESS_POINTS],
                experiment: None,
                types_set: 0,
            },
            GFP_KERNEL,
        )?;
        let causal_ptr = core::ptr::from_ref::<Causal>(&session.shared);
        if hardware || session.shared.tasks.is_some() {
            // SAFETY: process context; the works are synced and freed before `shared`.
            let works = unsafe {
                ffi::dprof_shim_irq_work_alloc(causal_irq_work, causal_ptr.cast_mut().cast())
            };
            if works.is_null() {
                return Err(ENOMEM);
            }
            session.shared.irq_works.store(works, Ordering::Relaxed);
        }
        // Dropping `session` on an error below unregisters what was registered.
        for (index, point) in plan.used_points().iter().enumerate() {
            // User points are counted by write(), sampled ones by the sampler's handler.
            if point.kind == abi::PROGRESS_USER || point.kind == abi::PROGRESS_SAMPLED {
                continue;
            }
            let data = KBox::new(
                ProbeData {
                    causal: causal_ptr,
                    index,
                },
                GFP_KERNEL,
            )?;
            let data_ptr = core::ptr::from_ref::<ProbeData>(&data)
                .cast_mut()
                .cast::<c_void>();
            session.probe_data.push(data, GFP_KERNEL)?;
            session.probes.reserve(1, GFP_KERNEL)?;
            match point.kind {
                abi::PROGRESS_KPROBE => {
                    // SAFETY: the name is NUL-terminated (CausalPlan::decode checks that at
                    // least one NUL follows it); `data_ptr` lives until the kprobe is
                    // unregistered in Drop.
                    let kp = unsafe {
                        ffi::dprof_shim_kprobe_register(point.name.as_ptr().cast(), data_ptr)
                    };
                    if let Some(errno) = ffi::err_ptr(kp) {
                        return Err(Error::from_errno(errno));
                    }
                    session
                        .probes
                        .push((Probe::Kprobe(kp), data_ptr), GFP_KERNEL)?;
                }
                abi::PROGRESS_TRACEPOINT => {
                    let tp = lookup::find_tracepoint(point.name_bytes()).ok_or(ENOENT)?;
                    // SAFETY: `tp` is a kernel tracepoint; the probe ignores its arguments
                    // (see tracepoint_visit); `data_ptr` lives until unregistration.
                    let ret = unsafe {
                        ffi::tracepoint_probe_register(
                            tp,
                            tracepoint_visit as *mut c_void,
                            data_ptr,
                        )
                    };
                    if ret != 0 {
                        return Err(Error::from_errno(ret));
                    }
                    session.probes.push(
                        (
                            Probe::Tracepoint(tp, tracepoint_visit as *mut c_void),
                            data_ptr,
                        ),
                        GFP_KERNEL,
                    )?;
                }
                _ => return Err(EINVAL),
            }
        }
        if session.shared.tasks.is_some() {
            let data = causal_ptr.cast_mut().cast::<c_void>();
            for (name, probe) in sched_probes() {
                // Every kernel with the kmem tracepoints dprof needs has these.
                let tp = lookup::find_tracepoint(name).ok_or(ENOTSUPP)?;
                session.probes.reserve(1, GFP_KERNEL)?;
                // SAFETY: `tp` is a kernel tracepoint and `probe` has its prototype; `data`
                // (the Causal) outlives the registration (Drop unregisters first).
                let ret = unsafe { ffi::tracepoint_probe_register(tp, probe, data) };
                if ret != 0 {
                    return Err(Error::from_errno(ret));
                }
                session
                    .probes
                    .push((Probe::Tracepoint(tp, probe), data), GFP_KERNEL)?;
            }
        }
        Ok(session)
    }

    /// What the sampler's handler reads.
    pub(crate) fn shared(&self) -> &Causal {
        &self.shared
    }

    /// Collection started: point totals count from now.
    pub(crate) fn on_start(&mut self) {
        for (base, point) in self.session_base.iter_mut().zip(self.shared.points.iter()) {
            *base = point.visits.load(Ordering::Relaxed);
        }
    }

    pub(crate) fn experiment_running(&self) -> bool {
        self.experiment.is_some()
    }

    /// IOC_CAUSAL_SCOPE: sets (or replaces) the scope. Only before the sampler starts, which
    /// the caller checks: no handler reads the scope then. EINVAL for ranges that are not
    /// sorted, non-empty and disjoint; EFAULT for unreadable ones.
    pub(crate) fn set_scope(&mut self, scope: &abi::CausalScope) -> Result {
        let ranges = crate::page_sites::read_user_ranges(scope.ranges_ptr, scope.range_count)?;
        let new = KBox::into_raw(KBox::new(ranges, GFP_KERNEL)?);
        let old = self.shared.scope.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: made by KBox::into_raw here; no handler runs before the sampler starts.
            drop(unsafe { KBox::from_raw(old) });
        }
        Ok(())
    }

    /// IOC_CAUSAL_TYPE: sets entry `index` of the type table. EBUSY while an experiment runs,
    /// ENOENT for a cache name no cache has, EFAULT for unreadable ips.
    pub(crate) fn set_type(&mut self, entry: &abi::CausalType) -> Result {
        if self.experiment.is_some() {
            return Err(EBUSY);
        }
        let count = entry.ip_count as usize;
        // Up to MAX_CAUSAL_TYPE_IPS x 8 = 128 KiB: kvmalloc rather than one high-order page.
        let mut bytes = KVVec::from_elem(0u8, count * 8, GFP_KERNEL)?;
        UserSlice::new(entry.ips_ptr as usize, count * 8)
            .reader()
            .read_slice(&mut bytes)?;
        let mut ips = KVVec::with_capacity(count, GFP_KERNEL)?;
        for chunk in bytes.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            ips.push(u64::from_le_bytes(b), GFP_KERNEL)?;
        }
        let name = entry.name_bytes();
        let cache = if name.is_empty() {
            core::ptr::null()
        } else {
            lookup::find_cache(name)?.cache
        };
        let set = TypeSet::new(&ips, cache)?;
        let slot = self.shared.types.get(entry.index as usize).ok_or(EINVAL)?;
        let old = slot.swap(KBox::into_raw(set), Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: made by KBox::into_raw here. No handler can hold it: handlers read type
            // sets only through `exp_type`, which is cleared when an experiment ends, after
            // which end_experiment() waited (synchronize_rcu) for every handler.
            drop(unsafe { KBox::from_raw(old) });
        }
        self.types_set |= 1 << entry.index;
        Ok(())
    }

    /// IOC_EXPERIMENT_START: EINVAL when one runs, the type is not set, or it asks for an
    /// arrival delay without an arrival point. Writes ExperimentStart.
    pub(crate) fn start_experiment(
        &mut self,
        control: &abi::ExperimentControl,
        sink: &RecordSink,
    ) -> Result {
        if self.experiment.is_some()
            || self.types_set & (1 << control.type_index) == 0
            || (control.arrival_delay_ns != 0 && self.shared.arrival.is_none())
        {
            return Err(EINVAL);
        }
        let c = &*self.shared;
        let ty = c
            .types
            .get(control.type_index as usize)
            .ok_or(EINVAL)?
            .load(Ordering::Relaxed);
        let mut base = ExperimentBase {
            control: *control,
            start_ns: ffi::now_ns(),
            global: c.global.load(Ordering::Relaxed),
            paused: c.paused.load(Ordering::Relaxed),
            credited: c.credited.load(Ordering::Relaxed),
            samples: c.samples.load(Ordering::Relaxed),
            type_samples: c.type_samples.load(Ordering::Relaxed),
            in_flight_delay: c.in_flight_delay.load(Ordering::Relaxed),
            capped_pauses: c.capped_pauses.load(Ordering::Relaxed),
            visits: [0; abi::MAX_PROGRESS_POINTS],
            time_sums: [0; abi::MAX_PROGRESS_POINTS],
        };
        for (i, point) in c.points.iter().enumerate() {
            base.visits[i] = point.visits.load(Ordering::Relaxed);
            base.time_sums[i] = point.time_sum.load(Ordering::Relaxed);
        }
        // No handler reads these while `running` is false; the release store below publishes
        // them. Epoch 0 is what CPUs start with, so it is skipped.
        c.global_at_start.store(base.global, Ordering::Relaxed);
        c.speedup
            .store(control.speedup_percent.min(100), Ordering::Relaxed);
        c.exp_type.store(ty, Ordering::Relaxed);
        c.arrival_delay
            .store(u64::from(control.arrival_delay_ns), Ordering::Relaxed);
        c.table_full.store(false, Ordering::Relaxed);
        c.max_owed_after_pause.store(0, Ordering::Relaxed);
        let mut epoch = c.epoch.load(Ordering::Relaxed).wrapping_add(1);
        if epoch == 0 {
            epoch = 1;
        }
        c.epoch.store(epoch, Ordering::Relaxed);
        c.running.store(true, Ordering::Release);
        let record = abi::ExperimentStart {
            control: *control,
            global_delay_ns: base.global,
        };
        let mut payload = [0u8; abi::ExperimentStart::SIZE];
        record.encode(&mut payload);
        sink.emit_preempt_off(abi::RecordKind::ExperimentStart, &payload);
        self.experiment = Some(base);
        Ok(())
    }

    /// Ends the running experiment (EINVAL when none) and writes ExperimentEnd, with
    /// EXPERIMENT_CUT_SHORT when `cut_short`. Process context: waits for the handlers.
    pub(crate) fn end_experiment(&mut self, sink: &RecordSink, cut_short: bool) -> Result {
        let Some(base) = self.experiment.take() else {
            return Err(EINVAL);
        };
        let c = &*self.shared;
        let end_ns = ffi::now_ns();
        // The points' counters are read at the end, with the clock: the wait for the
        // handlers below took about 100 ms under QEMU, and visits counted during it inflated
        // every experiment by a constant that a shorter effective duration (more delay)
        // divided less, which made an off-path type's slope positive.
        let mut visits_end = [0u64; abi::MAX_PROGRESS_POINTS];
        let mut time_sums_end = [0u64; abi::MAX_PROGRESS_POINTS];
        for (i, point) in c.points.iter().enumerate().take(c.point_count) {
            visits_end[i] = point.visits.load(Ordering::Relaxed);
            time_sums_end[i] = point.time_sum.load(Ordering::Relaxed);
        }
        c.running.store(false, Ordering::Release);
        c.exp_type.store(core::ptr::null_mut(), Ordering::Release);
        // Handlers run with interrupts off or in NMI, so a grace period waits for any that
        // saw the experiment running; the irq_works are synced after it (a handler may have
        // queued one before it finished). Expedited: a normal grace period took about 100 ms
        // under QEMU, half an experiment of dead time between experiments; this one asks
        // each CPU once.
        // SAFETY: process context.
        unsafe { ffi::synchronize_rcu_expedited() };
        self.sync_irq_works();
        let mut record = abi::ExperimentEnd {
            control: base.control,
            flags: if cut_short {
                abi::EXPERIMENT_CUT_SHORT
            } else {
                0
            } | if c.table_full.load(Ordering::Relaxed) {
                abi::EXPERIMENT_TASK_TABLE_FULL
            } else {
                0
            },
            point_count: c.point_count as u32,
            wall_ns: end_ns.wrapping_sub(base.start_ns),
            delay_ns: c.global.load(Ordering::Relaxed).wrapping_sub(base.global),
            paused_ns: c.paused.load(Ordering::Relaxed).wrapping_sub(base.paused),
            credited_ns: c
                .credited
                .load(Ordering::Relaxed)
                .wrapping_sub(base.credited),
            type_samples: c
                .type_samples
                .load(Ordering::Relaxed)
                .wrapping_sub(base.type_samples),
            samples: c.samples.load(Ordering::Relaxed).wrapping_sub(base.samples),
            points: [abi::PointVisits::default(); abi::MAX_PROGRESS_POINTS],
            in_flight_delay: 0,
            capped_pauses: c
                .capped_pauses
                .load(Ordering::Relaxed)
                .wrapping_sub(base.capped_pauses),
            max_owed_after_pause_ns: 0,
        };
        if record.capped_pauses != 0 {
            record.max_owed_after_pause_ns = c.max_owed_after_pause.load(Ordering::Relaxed);
        }
        if let Some((begin, end)) = c.latency_pair {
            // The handlers counted requests in flight from the plan's setting; the analysis
            // counts them from the session's start (`total`), as every delay went through
            // insert_delay: sum(d x (n - k)) = sum(d x n) - delay x k, modulo 2^64.
            let before_session = self.session_base[begin].wrapping_sub(self.session_base[end]);
            record.in_flight_delay = c
                .in_flight_delay
                .load(Ordering::Relaxed)
                .wrapping_sub(base.in_flight_delay)
                .wrapping_sub(record.delay_ns.wrapping_mul(before_session));
        }
        let offset = base.start_ns.wrapping_sub(c.origin_ns);
        for (i, out) in record.points.iter_mut().enumerate().take(c.point_count) {
            let visits = visits_end[i].wrapping_sub(base.visits[i]);
            // Sum of (t - origin) over the experiment's visits, minus (start - origin) per
            // visit: the sum of (t - start). Exact modulo 2^64, so wrapping is harmless.
            let sum = time_sums_end[i]
                .wrapping_sub(base.time_sums[i])
                .wrapping_sub(visits.wrapping_mul(offset));
            *out = abi::PointVisits {
                visits,
                time_sum_ns: sum,
                total: visits_end[i].wrapping_sub(self.session_base[i]),
            };
        }
        let mut payload = [0u8; abi::ExperimentEnd::SIZE];
        record.encode(&mut payload);
        sink.emit_preempt_off(abi::RecordKind::ExperimentEnd, &payload);
        Ok(())
    }

    fn sync_irq_works(&self) {
        let works = self.shared.irq_works.load(Ordering::Relaxed);
        if !works.is_null() {
            // SAFETY: allocated in new() and not freed before Drop.
            unsafe { ffi::dprof_shim_irq_work_sync(works) };
        }
    }
}

impl Drop for CausalSession {
    /// The sampler must already be released (its handlers read `shared`).
    fn drop(&mut self) {
        self.shared.running.store(false, Ordering::Release);
        let mut tracepoints = false;
        for (probe, data) in self.probes.iter() {
            match *probe {
                // SAFETY: registered in new(); unregister_kprobe waits for running handlers.
                Probe::Kprobe(kp) => unsafe { ffi::dprof_shim_kprobe_unregister(kp) },
                Probe::Tracepoint(tp, func) => {
                    // SAFETY: registered in new() with these arguments.
                    unsafe { ffi::tracepoint_probe_unregister(tp, func, *data) };
                    tracepoints = true;
                }
            }
        }
        if tracepoints {
            // SAFETY: process context; waits for probes in flight before `probe_data` goes.
            unsafe { ffi::dprof_shim_tracepoint_sync() };
        }
        // Any handler that could read a type set has finished (the sampler is released);
        // this also covers a caller that did not release it through the perf API's own wait.
        // SAFETY: process context.
        unsafe { ffi::synchronize_rcu() };
        let works = self
            .shared
            .irq_works
            .swap(core::ptr::null_mut(), Ordering::Relaxed);
        if !works.is_null() {
            // SAFETY: allocated in new(); synced before being freed, once.
            unsafe {
                ffi::dprof_shim_irq_work_sync(works);
                ffi::dprof_shim_irq_work_free(works);
            }
        }
        for slot in self.shared.types.iter() {
            let set = slot.swap(core::ptr::null_mut(), Ordering::Relaxed);
            if !set.is_null() {
                // SAFETY: made by KBox::into_raw in set_type; no handler can run any more.
                drop(unsafe { KBox::from_raw(set) });
            }
        }
        let scope = self
            .shared
            .scope
            .swap(core::ptr::null_mut(), Ordering::Relaxed);
        if !scope.is_null() {
            // SAFETY: made by KBox::into_raw in set_scope; no handler can run any more.
            drop(unsafe { KBox::from_raw(scope) });
        }
    }
}
