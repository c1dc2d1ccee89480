//! The samplers: one pinned perf counter per online CPU, created with the in-kernel perf API
//! (through the shim).
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

/// The counters of one collection; released on drop.
pub(crate) struct Sampler {
    events: KVec<*mut ffi::PerfEvent>,
    /// Read by the handlers until the counters are released; dropped after them.
    _context: KBox<HandlerContext>,
}

// SAFETY: perf events are kernel objects; the pointers are only handed back to the perf API
// from process context. The context is only read, by the handlers.
unsafe impl Send for Sampler {}

impl Sampler {
    /// Starts one counter per online CPU for the sampler `config` names, all writing to
    /// `sink`, and feeding `causal` when given.
    ///
    /// # Safety
    /// `sink` and `causal` must outlive the returned Sampler.
    pub(crate) unsafe fn start(
        sink: &RecordSink,
        config: &abi::Config,
        causal: Option<&Causal>,
    ) -> Result<Self> {
        let kind = u8::try_from(config.sampler).map_err(|_| EINVAL)?;
        let user = config.sample_user != 0;
        let context = KBox::new(
            HandlerContext {
                sink: core::ptr::from_ref(sink),
                kind,
                user,
                causal: causal.map_or(core::ptr::null(), core::ptr::from_ref),
            },
            GFP_KERNEL,
        )?;
        let ctx = core::ptr::from_ref::<HandlerContext>(&context)
            .cast_mut()
            .cast::<c_void>();
        let mut sampler = Self {
            events: KVec::new(),
            _context: context,
        };
        let period = u64::from(config.sample_period_ns);
        // A causal session samples every CPU all the time: user mode and idle included.
        let sample_user = user || causal.is_some();
        let sample_idle = causal.is_some();
        for cpu in 0..ffi::nr_cpu_ids() {
            // SAFETY: reads the online mask.
            if !unsafe { ffi::dprof_shim_cpu_online(cpu as u32) } {
                continue;
            }
            // SAFETY: process context; `ctx` lives as long as the counters (it is dropped
            // after them) and the sink outlives both per this function's contract.
            let event = unsafe {
                match kind {
                    abi::SAMPLER_KIND_SOFTWARE => ffi::dprof_shim_sampler_create(
                        cpu as i32,
                        period,
                        sample_user,
                        sample_idle,
                        ctx,
                    ),
                    abi::SAMPLER_KIND_IBS | abi::SAMPLER_KIND_PEBS => {
                        ffi::dprof_shim_hw_sampler_create(
                            cpu as i32,
                            config.pmu_type,
                            config.pmu_config,
                            config.pmu_config1,
                            period,
                            kind == abi::SAMPLER_KIND_PEBS,
                            sample_user,
                            ctx,
                        )
                    }
                    _ => return Err(EINVAL),
                }
            };
            let addr = event as usize;
            // ERR_PTR values are the last page of the address space.
            if addr >= (-4095isize) as usize {
                // Dropping `sampler` releases the counters created so far.
                return Err(Error::from_errno(addr as c_long as i32));
            }
            sampler.events.push(event, GFP_KERNEL)?;
        }
        Ok(sampler)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        for &event in self.events.iter() {
            // SAFETY: created by dprof_shim_*sampler_create and released once, here.
            unsafe { ffi::dprof_shim_sampler_release(event) };
        }
    }
}
