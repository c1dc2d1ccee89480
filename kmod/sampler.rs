//! The samplers: one pinned perf counter per online CPU, created with the in-kernel perf API
//! (through the shim). perf drops a CPU's counters when the CPU goes offline; a CPU hotplug
//! callback creates the collection's counter again when it comes back.
//!
//! - Software: a `cpu-clock` counter. Its overflow handler (hardirq) captures the interrupted
//!   instruction's registers, the %gs base and the instruction bytes; userland decodes the
//!   instruction and computes the data address, which this sampler cannot see.
//! - Hardware (AMD IBS op, Intel PEBS load latency): a PMU event configured by userland (PMU
//!   type and config read from sysfs). The handler (NMI) also copies what the PMU driver
//!   reported and said so in `sample_flags`: data address, physical address, data source,
//!   latency, and for IBS the raw registers.
//!
//! In a causal session (causal.rs) every sample first goes through the experiment's type
//! test and delay accounting. The counters then also sample user mode and the idle task
//! (idle CPUs are credited, CPUs in user mode must pause too); such samples, which a
//! non-causal session would not have taken, are not recorded, and without
//! `CAUSAL_RECORD_SAMPLES` no sample is recorded at all (the rings would fill in a long run).

use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::ffi::{c_long, c_void};
use kernel::prelude::*;

use crate::abi;
use crate::causal::Causal;
use crate::ffi::{self, SampleRegs};
use crate::sink::RecordSink;

/// What the overflow handler needs besides the sample: handed to perf as the counters'
/// context.
struct HandlerContext {
    sink: *const RecordSink,
    kind: u8,
    /// Keep user-mode samples (IBS cannot exclude them in hardware).
    user: bool,
    /// The causal session's shared state, or null.
    causal: *const Causal,
}

/// Called by the shim's overflow handler for every sample.
#[no_mangle]
extern "C" fn dprof_rs_sample(ctx: *mut c_void, sample: *const SampleRegs) {
    // SAFETY: `ctx` is the HandlerContext the counters were created with; the counters are
    // released (and their handlers finished) before it and the sink are freed. `sample`
    // points to the handler's stack.
    let (context, s) = unsafe { (&*ctx.cast::<HandlerContext>(), &*sample) };
    // SAFETY: the causal state outlives the counters (dropped after the sampler).
    if let Some(causal) = unsafe { context.causal.as_ref() } {
        // current->pid is 0 only for the idle tasks.
        let idle = s.tid == 0;
        let data_addr = (s.hw_valid & abi::HW_DATA_ADDR != 0).then_some(s.data_addr);
        causal.on_sample(
            s.ip,
            data_addr,
            idle,
            context.kind != abi::SAMPLER_KIND_SOFTWARE,
        );
        if idle || !causal.record_samples() {
            return;
        }
    }
    if s.user != 0 && !context.user {
        return;
    }
    // SAFETY: see above.
    let sink = unsafe { &*context.sink };
    let mut record = abi::AccessSample {
        ip: s.ip,
        regs: s.regs,
        gs_base: s.gs_base,
        pid: s.pid,
        tid: s.tid,
        insn: s.insn,
        insn_len: s.insn_len.min(abi::SAMPLE_INSN_BYTES as u32) as u8,
        flags: if s.user != 0 { abi::SAMPLE_USER } else { 0 },
        sampler: context.kind,
        hw_valid: s.hw_valid,
        data_addr: s.data_addr,
        phys_addr: s.phys_addr,
        data_src: s.data_src,
        latency: s.latency,
        ..abi::AccessSample::default()
    };
    if context.kind == abi::SAMPLER_KIND_IBS {
        // An IBS sample without its registers is useless to the decoder: dropped.
        let Some(regs) = s
            .raw
            .get(..s.raw_len as usize)
            .and_then(abi::IbsRegs::from_perf_raw)
        else {
            return;
        };
        record.ibs = Some(regs);
        let mut payload = [0u8; abi::AccessSample::SIZE + abi::IbsRegs::SIZE];
        let (head, tail) = payload.split_at_mut(abi::AccessSample::SIZE);
        let (Ok(head), Ok(tail)) = (
            <&mut [u8; abi::AccessSample::SIZE]>::try_from(head),
            <&mut [u8; abi::IbsRegs::SIZE]>::try_from(tail),
        ) else {
            return;
        };
        record.encode(head);
        regs.encode(tail);
        sink.emit(abi::RecordKind::IbsSample, &payload);
    } else {
        let mut payload = [0u8; abi::AccessSample::SIZE];
        record.encode(&mut payload);
        sink.emit(abi::RecordKind::AccessSample, &payload);
    }
}

/// How the counters of one collection are made, kept for CPUs that come online later.
struct Counters {
    /// Per possible CPU: its counter, or null (offline, or not created).
    events: KVec<AtomicPtr<ffi::PerfEvent>>,
    /// Read by the handlers until the counters are released; dropped after them.
    context: HandlerContext,
    period: u64,
    sample_user: bool,
    sample_idle: bool,
    pmu_type: u32,
    pmu_config: u64,
    pmu_config1: u64,
}

impl Counters {
    /// Creates the counter of `cpu` (process context, `cpu` online); an ERR_PTR on failure.
    fn create(&self, cpu: usize) -> *mut ffi::PerfEvent {
        let ctx = core::ptr::from_ref(&self.context)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: process context; `ctx` lives in this object, which releases the counters
        // before it goes.
        unsafe {
            match self.context.kind {
                abi::SAMPLER_KIND_SOFTWARE => ffi::dprof_shim_sampler_create(
                    cpu as i32,
                    self.period,
                    self.sample_user,
                    self.sample_idle,
                    ctx,
                ),
                _ => ffi::dprof_shim_hw_sampler_create(
                    cpu as i32,
                    self.pmu_type,
                    self.pmu_config,
                    self.pmu_config1,
                    self.period,
                    self.context.kind == abi::SAMPLER_KIND_PEBS,
                    self.sample_user,
                    ctx,
                ),
            }
        }
    }

    /// Releases the counter of `cpu`, if any. Process context.
    fn release(&self, cpu: usize) {
        let Some(slot) = self.events.get(cpu) else {
            return;
        };
        let event = slot.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !event.is_null() {
            // SAFETY: created by dprof_shim_*sampler_create; the swap hands it out once.
            unsafe { ffi::dprof_shim_sampler_release(event) };
        }
    }
}

/// The counters of the running collection, for the CPU hotplug callbacks; null when none.
/// Written with the CPU hotplug lock held for reading, read by the callbacks, which run with
/// it held for writing: never both at once.
static ACTIVE: AtomicPtr<Counters> = AtomicPtr::new(core::ptr::null_mut());

/// A CPU came online (the hotplug thread, on that CPU): perf drops a CPU's counters when it
/// goes offline and does not bring them back, so the collection's counter is created anew.
/// A counter that cannot be made is said in the kernel log.
pub(crate) fn cpu_online(cpu: usize) {
    let counters = ACTIVE.load(Ordering::Acquire);
    if counters.is_null() {
        return;
    }
    // SAFETY: ACTIVE points at live counters while the hotplug lock is held for writing
    // (see ACTIVE).
    let counters = unsafe { &*counters };
    counters.release(cpu);
    let event = counters.create(cpu);
    if (event as usize) >= (-4095isize) as usize {
        pr_warn!(
            "no sampler on CPU {cpu} after it came online ({})\n",
            event as isize
        );
    } else if let Some(slot) = counters.events.get(cpu) {
        slot.store(event, Ordering::Release);
    }
}

/// A CPU is going offline (the hotplug thread, on that CPU): its counter goes with it.
pub(crate) fn cpu_offline(cpu: usize) {
    let counters = ACTIVE.load(Ordering::Acquire);
    if !counters.is_null() {
        // SAFETY: as in cpu_online.
        unsafe { &*counters }.release(cpu);
    }
}

/// The counters of one collection; released on drop.
pub(crate) struct Sampler {
    counters: KBox<Counters>,
}

// SAFETY: perf events are kernel objects; the pointers are only handed back to the perf API
// from process context. The context is only read, by the handlers.
unsafe impl Send for Sampler {}

impl Sampler {
    /// Starts one counter per online CPU for the sampler `config` names, all writing to
    /// `sink`, and feeding `causal` when given; CPUs that come online later get theirs then.
    ///
    /// # Safety
    /// `sink` and `causal` must outlive the returned Sampler.
    pub(crate) unsafe fn start(
        sink: &RecordSink,
        config: &abi::Config,
        causal: Option<&Causal>,
    ) -> Result<Self> {
        let kind = u8::try_from(config.sampler).map_err(|_| EINVAL)?;
        if !matches!(
            kind,
            abi::SAMPLER_KIND_SOFTWARE | abi::SAMPLER_KIND_IBS | abi::SAMPLER_KIND_PEBS
        ) {
            return Err(EINVAL);
        }
        let user = config.sample_user != 0;
        let cpus = ffi::nr_cpu_ids();
        let mut events = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            events.push(AtomicPtr::new(core::ptr::null_mut()), GFP_KERNEL)?;
        }
        let sampler = Self {
            counters: KBox::new(
                Counters {
                    events,
                    context: HandlerContext {
                        sink: core::ptr::from_ref(sink),
                        kind,
                        user,
                        causal: causal.map_or(core::ptr::null(), core::ptr::from_ref),
                    },
                    period: u64::from(config.sample_period_ns),
                    // A causal session samples every CPU all the time: user mode and idle
                    // included.
                    sample_user: user || causal.is_some(),
                    sample_idle: causal.is_some(),
                    pmu_type: config.pmu_type,
                    pmu_config: config.pmu_config,
                    pmu_config1: config.pmu_config1,
                },
                GFP_KERNEL,
            )?,
        };
        // No CPU comes or goes while the counters are made and published.
        // SAFETY: process context.
        unsafe { ffi::dprof_shim_cpus_read_lock() };
        let mut result = Ok(());
        for cpu in 0..cpus {
            // SAFETY: reads the online mask.
            if !unsafe { ffi::dprof_shim_cpu_online(cpu as u32) } {
                continue;
            }
            let event = sampler.counters.create(cpu);
            let addr = event as usize;
            // ERR_PTR values are the last page of the address space.
            if addr >= (-4095isize) as usize {
                result = Err(Error::from_errno(addr as c_long as i32));
                break;
            }
            sampler.counters.events[cpu].store(event, Ordering::Release);
        }
        if result.is_ok() {
            ACTIVE.store(
                core::ptr::from_ref::<Counters>(&sampler.counters).cast_mut(),
                Ordering::Release,
            );
        }
        // SAFETY: taken above.
        unsafe { ffi::dprof_shim_cpus_read_unlock() };
        // On failure, dropping `sampler` releases the counters created so far.
        result.map(|()| sampler)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: process context.
        unsafe { ffi::dprof_shim_cpus_read_lock() };
        let mine = core::ptr::from_ref::<Counters>(&self.counters).cast_mut();
        let _ = ACTIVE.compare_exchange(
            mine,
            core::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        for cpu in 0..self.counters.events.len() {
            self.counters.release(cpu);
        }
        // SAFETY: taken above.
        unsafe { ffi::dprof_shim_cpus_read_unlock() };
    }
}
