//! Samples of the hardware samplers (AMD IBS op, Intel PEBS load latency) as perf writes them
//! into the ring. Parsed here rather than with `linux-perf-event-reader`, whose sample parser
//! reads over `PERF_SAMPLE_WEIGHT` and `PERF_SAMPLE_DATA_SRC` without keeping them: the
//! latency and the data source are what these samplers are for. The layout is fixed by
//! [`HW_SAMPLE_TYPE`] (and `PERF_SAMPLE_RAW` for IBS), in the order
//! `perf_event_open(2)` documents.
//!
//! [`HW_SAMPLE_TYPE`]: super::events::HW_SAMPLE_TYPE

use super::events::{intr_regs_mask, ABI_REG_ORDER};

/// `misc` bits of a record: where the sampled instruction ran.
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_USER: u16 = 2;

/// One hardware sample, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HwSample<'a> {
    pub(crate) ip: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) time_ns: u64,
    pub(crate) addr: u64,
    pub(crate) cpu: u32,
    /// The `PERF_SAMPLE_RAW` bytes (IBS registers), padding included; empty without RAW.
    pub(crate) raw: &'a [u8],
    pub(crate) weight: u64,
    pub(crate) data_src: u64,
    /// The interrupted general-purpose registers in the ABI's order.
    pub(crate) regs: [u64; dprof_abi::SAMPLE_REGS],
    pub(crate) phys_addr: u64,
    pub(crate) user: bool,
}

/// Reads u64s and u32s off the front of a record body.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

/// Parses the body (after the 8-byte header) of a sample record of a hardware sampler opened
/// with `HW_SAMPLE_TYPE`, plus `PERF_SAMPLE_RAW` when `raw`; `None` when it is cut short.
pub(crate) fn parse(body: &[u8], misc: u16, raw: bool) -> Option<HwSample<'_>> {
    let mut c = Cursor(body);
    let _identifier = c.u64()?;
    let ip = c.u64()?;
    let (pid, tid) = (c.u32()?, c.u32()?);
    let time_ns = c.u64()?;
    let addr = c.u64()?;
    let (cpu, _reserved) = (c.u32()?, c.u32()?);
    let raw = if raw {
        let size = c.u32()? as usize;
        c.take(size)?
    } else {
        &[]
    };
    let weight = c.u64()?;
    let data_src = c.u64()?;
    let mut regs = [0u64; dprof_abi::SAMPLE_REGS];
    // PERF_SAMPLE_REGS_INTR: the ABI word, then the registers of the mask in bit order.
    if c.u64()? != 0 {
        let mask = intr_regs_mask();
        let mut by_perf_number = [0u64; 64];
        for (bit, value) in by_perf_number.iter_mut().enumerate() {
            if mask & (1 << bit) != 0 {
                *value = c.u64()?;
            }
        }
        for (slot, &perf_reg) in regs.iter_mut().zip(&ABI_REG_ORDER) {
            *slot = by_perf_number[perf_reg as usize];
        }
    }
    let phys_addr = c.u64()?;
    Some(HwSample {
        ip,
        pid,
        tid,
        time_ns,
        addr,
        cpu,
        raw,
        weight,
        data_src,
        regs,
        phys_addr,
        user: misc & MISC_CPUMODE_MASK == MISC_USER,
    })
}

#[cfg(test)]
mod tests;
