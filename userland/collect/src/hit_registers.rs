//! Which registers of a history hit a profile keeps ([`HistoryRegisters::Address`]): the
//! analysis checks a hit by recomputing the address of the instruction before the trap from
//! the hit's registers, and reads only the base and index registers of its memory operands.
//! The collector finds that instruction in live kernel code exactly as the analysis finds it
//! in the profile's (both through [`dprof_analysis::histories::hit_registers`]), once per
//! distinct trap ip (the writer keeps the answers), and keeps every register when it cannot
//! find or decode it, so that a hit never loses what its check reads.
//!
//! [`transcode`] rewrites a profile with its hits so reduced, the code coming from the
//! profile itself: what `dprof-bench --transcode` measures on profiles collected before.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use dprof_analysis::symbols::Kallsyms;
use dprof_format::{
    HistoryRegisters, HitRegisterFilter, KernelText, Profile, ProfileEncoder, ProfileError,
    WriteError, ALL_REGISTERS,
};

use crate::histories::function_range;
use crate::kcore::Kcore;

/// Where kernel code is read from: live memory ([`Kcore`]) or a profile's copy of it
/// ([`KernelText`]).
pub trait KernelCode {
    /// The `len` bytes at kernel address `address`, when they can all be read.
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>>;
}

impl KernelCode for Kcore {
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        Kcore::read(self, address, len)
    }
}

impl KernelCode for KernelText {
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        self.bytes_at(address, len).map(<[u8]>::to_vec)
    }
}

/// Finds the registers a hit keeps from its trap ip, reading the code of each function a
/// trap lands in once (the same code [`crate::histories::capture_text`] copies into the
/// profile at the end).
#[derive(Debug)]
pub struct HitRegisterFinder<M> {
    memory: M,
    symbols: Kallsyms,
    /// The code read so far.
    text: KernelText,
    /// Code ranges read, or tried: each is read once.
    tried: HashSet<(u64, u64)>,
}

impl<M: KernelCode> HitRegisterFinder<M> {
    /// Reads code from `memory`, finding functions with `symbols`.
    #[must_use]
    pub fn new(memory: M, symbols: Kallsyms) -> Self {
        Self {
            memory,
            symbols,
            text: KernelText::new(),
            tried: HashSet::new(),
        }
    }

    /// The registers (a bit per `dprof_abi::reg` index) a hit trapping at `trap_ip` keeps:
    /// those its accessing instruction's memory operands are addressed through, or every
    /// register when that instruction cannot be found or decoded.
    pub fn registers(&mut self, trap_ip: u64) -> u16 {
        let Some(loc) = self.symbols.lookup(trap_ip) else {
            return ALL_REGISTERS;
        };
        let at_start = loc.offset == 0;
        self.read_function(trap_ip);
        if at_start {
            // The access may be the last instruction of the function before.
            self.read_function(trap_ip.wrapping_sub(1));
        }
        dprof_analysis::histories::hit_registers(&self.text, &self.symbols, trap_ip)
            .unwrap_or(ALL_REGISTERS)
    }

    fn read_function(&mut self, ip: u64) {
        let Some((start, end)) = function_range(&self.symbols, ip) else {
            return;
        };
        if !self.tried.insert((start, end)) {
            return;
        }
        let len = usize::try_from(end - start).unwrap_or(0);
        if let Some(bytes) = self.memory.read(start, len) {
            self.text.insert(start, &bytes);
        }
    }
}

impl<M: KernelCode + Send + 'static> HitRegisterFinder<M> {
    /// The finder as the writer's filter ([`dprof_format::ProfileWriter::set_hit_register_filter`]).
    #[must_use]
    pub fn into_filter(mut self) -> HitRegisterFilter {
        Box::new(move |trap_ip| self.registers(trap_ip))
    }
}

/// The filter `dprof collect` installs with histories: live code from `kcore`; every
/// register of every hit when it cannot be opened (the history planner and the code capture
/// at the end say why).
#[must_use]
pub fn live_filter(symbols: Kallsyms, kcore: &Path) -> HitRegisterFilter {
    match Kcore::open(kcore) {
        Ok(kcore) => HitRegisterFinder::new(kcore, symbols).into_filter(),
        Err(_) => Box::new(|_| ALL_REGISTERS),
    }
}

/// Why a profile could not be transcoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscodeError {
    /// The profile read has a problem.
    #[error("cannot read the profile: {0}")]
    Read(#[from] ProfileError),
    /// The new profile could not be written.
    #[error("cannot write the profile: {0}")]
    Write(#[from] WriteError),
}

/// Writes `profile` anew to `out`: the same sections and records (in the same per-CPU
/// order, coded anew), with its history hits reduced to the registers their check reads
/// when `reduce_hits` (found in the profile's own code and kallsyms, as `dprof collect` finds
/// them live; the header then says [`HistoryRegisters::Address`]); without, the records as
/// they are, to compare with.
///
/// # Errors
/// [`TranscodeError::Read`] for a problem in `profile`'s records, [`TranscodeError::Write`]
/// when `out` fails.
pub fn transcode<W: Write>(
    profile: &Profile,
    out: W,
    reduce_hits: bool,
) -> Result<W, TranscodeError> {
    let mut header = profile.header().clone();
    if reduce_hits {
        header.config.history_registers = HistoryRegisters::Address;
    }
    let mut encoder = ProfileEncoder::new(out, &header, profile.kallsyms(), profile.modules())?;
    if let Some(btf) = profile.btf() {
        encoder.btf(btf)?;
    }
    if reduce_hits {
        let finder =
            HitRegisterFinder::new(profile.text().clone(), Kallsyms::parse(profile.kallsyms()));
        encoder.set_hit_register_filter(finder.into_filter());
    }
    let mut records = profile.records();
    let mut wire = [0u8; dprof_abi::MAX_RECORD_SIZE];
    while let Some(written) = records.next_with(|header, record| {
        let size = record.encode(header.cpu, header.time_ns, &mut wire);
        encoder.records(&wire[..size])
    }) {
        written??;
    }
    encoder.set_page_owners(profile.page_owners().clone());
    Ok(encoder.finish_with_text(profile.stop(), profile.text())?)
}

#[cfg(test)]
mod tests;
