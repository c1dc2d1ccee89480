//! Where every producer of records writes: one ring per possible CPU.
//!
//! The slab probes (session.rs), the history engine (history.rs), the sampler (sampler.rs)
//! and the causal experiments (causal.rs) all emit through a [`RecordSink`], and only through
//! it, so none of them needs to know the others or the session that owns the sink.

use kernel::ffi::c_void;
use kernel::prelude::*;

use crate::abi;
use crate::ffi;
use crate::ring::Ring;

/// The per-CPU rings of one collection.
pub(crate) struct RecordSink {
    rings: KVec<Ring>,
}

impl RecordSink {
    /// Rings of `ring_bytes` for every possible CPU.
    pub(crate) fn new(ring_bytes: u32) -> Result<Self> {
        let cpus = ffi::nr_cpu_ids();
        let mut rings = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            rings.push(Ring::new(ring_bytes)?, GFP_KERNEL)?;
        }
        Ok(Self { rings })
    }

    /// The rings, indexed by CPU, for the reader.
    pub(crate) fn rings(&self) -> &[Ring] {
        &self.rings
    }

    /// Writes a record to this CPU's ring. Preemption must be off. False when it was
    /// dropped (the ring was full; the ring counts it).
    pub(crate) fn emit(&self, kind: abi::RecordKind, payload: &[u8]) -> bool {
        let cpu = ffi::this_cpu();
        self.rings
            .get(cpu)
            .is_some_and(|ring| ring.write(cpu as u32, kind, payload))
    }

    /// Writes a record from process context (ioctls): with preemption off around it.
    pub(crate) fn emit_preempt_off(&self, kind: abi::RecordKind, payload: &[u8]) {
        let mut call = EmitCall {
            sink: self,
            kind,
            payload,
        };
        // SAFETY: `emit_call` gets `call` back, which lives during the call.
        unsafe {
            ffi::dprof_shim_preempt_off(emit_call, core::ptr::from_mut(&mut call).cast::<c_void>())
        };
    }
}

struct EmitCall<'a> {
    sink: &'a RecordSink,
    kind: abi::RecordKind,
    payload: &'a [u8],
}

/// # Safety
/// `info` must point to a live [`EmitCall`].
unsafe extern "C" fn emit_call(info: *mut c_void) {
    // SAFETY: `info` is the EmitCall of emit_preempt_off, live during the call.
    let call = unsafe { &*info.cast::<EmitCall<'_>>() };
    call.sink.emit(call.kind, call.payload);
}
