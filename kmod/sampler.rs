//! The software sampler: a pinned `cpu-clock` perf counter per online CPU, created with the
//! in-kernel perf API (through the shim). Its overflow handler (hardirq context) captures the
//! interrupted instruction's registers, the %gs base and the instruction bytes; userland
//! decodes the instruction and computes the data address, which this sampler cannot see.

use kernel::ffi::{c_void, c_long};
use kernel::prelude::*;

use crate::abi;
use crate::ffi;
use crate::session::Session;

/// Mirrors `struct dprof_sample_regs` in dprof_shim.c.
#[repr(C)]
pub(crate) struct SampleRegs {
    ip: u64,
    regs: [u64; abi::SAMPLE_REGS],
    gs_base: u64,
    pid: u32,
    tid: u32,
    insn: [u8; abi::SAMPLE_INSN_BYTES],
    insn_len: u32,
    user: u32,
}

/// Called by the shim's overflow handler for every sample.
#[no_mangle]
extern "C" fn dprof_rs_sample(ctx: *mut c_void, sample: *const SampleRegs) {
    // SAFETY: `ctx` is the Session the counters were created with; they are released (and
    // their handlers finished) before it is freed. `sample` points to the handler's stack.
    let (session, s) = unsafe { (&*ctx.cast::<Session>(), &*sample) };
    let record = abi::AccessSample {
        ip: s.ip,
        regs: s.regs,
        gs_base: s.gs_base,
        pid: s.pid,
        tid: s.tid,
        insn: s.insn,
        insn_len: s.insn_len.min(abi::SAMPLE_INSN_BYTES as u32) as u8,
        flags: if s.user != 0 { abi::SAMPLE_USER } else { 0 },
        sampler: abi::SAMPLER_KIND_SOFTWARE,
        ..abi::AccessSample::default()
    };
    let mut payload = [0u8; abi::AccessSample::SIZE];
    record.encode(&mut payload);
    session.emit(abi::RecordKind::AccessSample, &payload);
}

/// The counters of one collection; released on drop.
pub(crate) struct Sampler {
    events: KVec<*mut ffi::PerfEvent>,
}

// SAFETY: perf events are kernel objects; the pointers are only handed back to the perf API
// from process context.
unsafe impl Send for Sampler {}

impl Sampler {
    /// Starts one counter per online CPU, all writing to `session`.
    ///
    /// # Safety
    /// `session` must outlive the returned Sampler.
    pub(crate) unsafe fn start(session: &Session, period_ns: u32, user: bool) -> Result<Self> {
        let mut sampler = Self { events: KVec::new() };
        let ctx = core::ptr::from_ref(session).cast_mut().cast::<c_void>();
        for cpu in 0..ffi::nr_cpu_ids() {
            // SAFETY: reads the online mask.
            if !unsafe { ffi::dprof_shim_cpu_online(cpu as u32) } {
                continue;
            }
            // SAFETY: process context; `ctx` outlives the counter per this function's contract.
            let event = unsafe {
                ffi::dprof_shim_sampler_create(cpu as i32, u64::from(period_ns), user, ctx)
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
            // SAFETY: created by dprof_shim_sampler_create and released once, here.
            unsafe { ffi::dprof_shim_sampler_release(event) };
        }
    }
}
