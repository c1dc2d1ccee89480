//! From a software access sample (registers + instruction bytes) to the data it touched: decode
//! the instruction at the sample's ip and compute its memory operand's effective address.
//!
//! CONTRACT (shared by the decode implementation and its users; keep these names): the types
//! below and [`Decoder::access`].
//!
//! Decoding is done by iced-x86 in 64-bit mode. The result of decoding one instruction (which
//! registers form the address, the displacement, the segment, the size and whether it reads or
//! writes) is kept per ip together with the instruction's bytes, so a hot instruction is decoded
//! once and every later sample of it only reads two registers: [`Decoder::access`] does not
//! allocate on a cache hit. Samples that yield no single address are counted per reason in
//! [`DecodeStats`], never guessed.
//!
//! What counts as one access: an instruction with exactly one explicit memory operand and no
//! other memory location (iced's `used_memory`). String instructions, push/pop, call/ret,
//! enter/leave, xlat and gathers touch memory through implicit or several operands and are
//! [`NoAccess::MultipleMemoryOperands`]: they are real accesses, but not to one address this
//! decoder can name.

use dprof_abi::{AccessSample, AccessSampleView, SAMPLE_INSN_BYTES, SAMPLE_REGS, SAMPLE_USER};
use iced_x86::{
    DecoderOptions, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};

use crate::table::{Table, TableKey};
use dprof_model::{AccessKind, Bucket};

#[cfg(test)]
mod tests;

/// What the decoder reads of a sample: an [`AccessSample`], or an [`AccessSampleView`] of one
/// still in its record (no copy of the other registers and fields).
pub trait SampleFields {
    /// The sampled instruction's address.
    fn ip(&self) -> u64;
    /// `SAMPLE_*` flags.
    fn flags(&self) -> u8;
    /// `SAMPLER_KIND_*` that took the sample.
    fn sampler(&self) -> u8;
    /// Base of `%gs`.
    fn gs_base(&self) -> u64;
    /// Valid bytes of [`SampleFields::insn`].
    fn insn_len(&self) -> u8;
    /// The instruction bytes.
    fn insn(&self) -> [u8; SAMPLE_INSN_BYTES];
    /// General-purpose register `index` (see `dprof_abi::reg`); 0 past the last.
    fn reg(&self, index: usize) -> u64;
}

impl SampleFields for AccessSample {
    #[inline]
    fn ip(&self) -> u64 {
        self.ip
    }
    #[inline]
    fn flags(&self) -> u8 {
        self.flags
    }
    #[inline]
    fn sampler(&self) -> u8 {
        self.sampler
    }
    #[inline]
    fn gs_base(&self) -> u64 {
        self.gs_base
    }
    #[inline]
    fn insn_len(&self) -> u8 {
        self.insn_len
    }
    #[inline]
    fn insn(&self) -> [u8; SAMPLE_INSN_BYTES] {
        self.insn
    }
    #[inline]
    fn reg(&self, index: usize) -> u64 {
        self.regs.get(index).copied().unwrap_or(0)
    }
}

impl SampleFields for AccessSampleView<'_> {
    #[inline]
    fn ip(&self) -> u64 {
        AccessSampleView::ip(self)
    }
    #[inline]
    fn flags(&self) -> u8 {
        AccessSampleView::flags(self)
    }
    #[inline]
    fn sampler(&self) -> u8 {
        AccessSampleView::sampler(self)
    }
    #[inline]
    fn gs_base(&self) -> u64 {
        AccessSampleView::gs_base(self)
    }
    #[inline]
    fn insn_len(&self) -> u8 {
        AccessSampleView::insn_len(self)
    }
    #[inline]
    fn insn(&self) -> [u8; SAMPLE_INSN_BYTES] {
        AccessSampleView::insn(self)
    }
    #[inline]
    fn reg(&self, index: usize) -> u64 {
        AccessSampleView::reg(self, index)
    }
}

/// Register values as [`Template::apply`] reads them.
trait Regs {
    fn reg(&self, index: usize) -> u64;
}

impl Regs for [u64; SAMPLE_REGS] {
    #[inline]
    fn reg(&self, index: usize) -> u64 {
        self.get(index).copied().unwrap_or(0)
    }
}

/// A sample's registers.
struct SampleRegs<'s, S: ?Sized>(&'s S);

impl<S: SampleFields + ?Sized> Regs for SampleRegs<'_, S> {
    #[inline]
    fn reg(&self, index: usize) -> u64 {
        self.0.reg(index)
    }
}

/// The one memory access of a sampled instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemAccess {
    /// Effective (linear) address, segment base included.
    pub addr: u64,
    /// Bytes accessed.
    pub size: u32,
    /// Read, write or both.
    pub kind: AccessKind,
    /// The operand was %gs-relative (per-CPU data in kernel mode).
    pub gs_relative: bool,
}

/// Why a sample yields no single data address (counted, never guessed).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum NoAccess {
    /// No instruction bytes were captured (ip unreadable).
    NoBytes,
    /// The bytes do not decode to a valid instruction.
    Undecodable,
    /// The instruction has no memory operand (register-only, branches, nop, ...).
    NoMemoryOperand,
    /// Several memory operands or an implicit one: string ops, push/pop, call/ret, ...
    MultipleMemoryOperands,
    /// `lea` and other operands that compute an address without accessing memory.
    AddressOnly,
    /// The sample ran in user mode (decoded only for kernel samples for now).
    UserMode,
    /// The operand is %fs-relative: the sample does not carry the %fs base (in the kernel,
    /// %fs holds the user's thread pointer, not kernel data).
    UnsupportedSegment,
}

impl NoAccess {
    /// The coverage bucket of a sample the decoder found no single data address in.
    #[must_use]
    pub const fn bucket(self) -> Bucket {
        match self {
            Self::NoBytes => Bucket::NoBytes,
            Self::Undecodable => Bucket::Undecodable,
            Self::NoMemoryOperand => Bucket::NoMemoryOperand,
            Self::MultipleMemoryOperands => Bucket::MultipleMemoryOperands,
            Self::AddressOnly => Bucket::AddressOnly,
            Self::UserMode => Bucket::UserMode,
            Self::UnsupportedSegment => Bucket::UnsupportedSegment,
        }
    }

    /// Every reason, in the order reports list them.
    pub const ALL: [Self; 7] = [
        Self::NoMemoryOperand,
        Self::MultipleMemoryOperands,
        Self::AddressOnly,
        Self::UserMode,
        Self::NoBytes,
        Self::Undecodable,
        Self::UnsupportedSegment,
    ];

    /// A short `snake_case` name, as in JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NoBytes => "no_bytes",
            Self::Undecodable => "undecodable",
            Self::NoMemoryOperand => "no_memory_operand",
            Self::MultipleMemoryOperands => "multiple_memory_operands",
            Self::AddressOnly => "address_only",
            Self::UserMode => "user_mode",
            Self::UnsupportedSegment => "unsupported_segment",
        }
    }
}

impl std::fmt::Display for NoAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NoBytes => "no instruction bytes",
            Self::Undecodable => "undecodable",
            Self::NoMemoryOperand => "no memory operand",
            Self::MultipleMemoryOperands => "implicit or several memory operands",
            Self::AddressOnly => "address only (lea, prefetch)",
            Self::UserMode => "user mode",
            Self::UnsupportedSegment => "%fs-relative",
        })
    }
}

/// What a sample's instruction did with memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeOutcome {
    /// One memory operand at a computed address.
    Access(MemAccess),
    /// No single data address, and why.
    None(NoAccess),
}

/// The decoded instruction of a sample, for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Bytes the instruction takes.
    pub len: u8,
    mnemonic: Mnemonic,
}

impl Insn {
    /// The mnemonic in lower case ("mov", "lock xadd" shows as "xadd").
    #[must_use]
    pub fn mnemonic(&self) -> String {
        format!("{:?}", self.mnemonic).to_ascii_lowercase()
    }
}

/// Samples per outcome, for the coverage line of a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecodeStats {
    /// Samples given to [`Decoder::access`].
    pub samples: u64,
    /// Of those, with one address: loads.
    pub reads: u64,
    /// Stores.
    pub writes: u64,
    /// Read-modify-writes.
    pub read_writes: u64,
    /// Of the samples with an address, the %gs-relative ones (per-CPU data).
    pub gs_relative: u64,
    /// [`NoAccess::NoBytes`].
    pub no_bytes: u64,
    /// [`NoAccess::Undecodable`].
    pub undecodable: u64,
    /// [`NoAccess::NoMemoryOperand`].
    pub no_memory_operand: u64,
    /// [`NoAccess::MultipleMemoryOperands`].
    pub multiple_memory_operands: u64,
    /// [`NoAccess::AddressOnly`].
    pub address_only: u64,
    /// [`NoAccess::UserMode`].
    pub user_mode: u64,
    /// [`NoAccess::UnsupportedSegment`].
    pub unsupported_segment: u64,
    /// Instructions decoded (cache misses); the rest came from the cache.
    pub decoded: u64,
}

impl DecodeStats {
    /// Samples that yielded an address.
    #[must_use]
    pub const fn with_address(&self) -> u64 {
        self.reads + self.writes + self.read_writes
    }

    /// Samples that yielded none for `reason`.
    #[must_use]
    pub const fn count(&self, reason: NoAccess) -> u64 {
        match reason {
            NoAccess::NoBytes => self.no_bytes,
            NoAccess::Undecodable => self.undecodable,
            NoAccess::NoMemoryOperand => self.no_memory_operand,
            NoAccess::MultipleMemoryOperands => self.multiple_memory_operands,
            NoAccess::AddressOnly => self.address_only,
            NoAccess::UserMode => self.user_mode,
            NoAccess::UnsupportedSegment => self.unsupported_segment,
        }
    }

    fn count_mut(&mut self, reason: NoAccess) -> &mut u64 {
        match reason {
            NoAccess::NoBytes => &mut self.no_bytes,
            NoAccess::Undecodable => &mut self.undecodable,
            NoAccess::NoMemoryOperand => &mut self.no_memory_operand,
            NoAccess::MultipleMemoryOperands => &mut self.multiple_memory_operands,
            NoAccess::AddressOnly => &mut self.address_only,
            NoAccess::UserMode => &mut self.user_mode,
            NoAccess::UnsupportedSegment => &mut self.unsupported_segment,
        }
    }

    fn record(&mut self, outcome: &DecodeOutcome) {
        self.samples += 1;
        match outcome {
            DecodeOutcome::Access(a) => {
                match a.kind {
                    AccessKind::Read => self.reads += 1,
                    AccessKind::Write => self.writes += 1,
                    AccessKind::ReadWrite => self.read_writes += 1,
                }
                self.gs_relative += u64::from(a.gs_relative);
            }
            DecodeOutcome::None(reason) => *self.count_mut(*reason) += 1,
        }
    }

    /// Adds `other`'s counts to these (for decoders run over parts of a profile).
    pub fn merge(&mut self, other: &Self) {
        self.samples += other.samples;
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_writes += other.read_writes;
        self.gs_relative += other.gs_relative;
        for reason in NoAccess::ALL {
            *self.count_mut(reason) += other.count(reason);
        }
        self.decoded += other.decoded;
    }
}

impl std::fmt::Display for DecodeStats {
    /// "1234 of 2000 samples (61.7%) have a data address; 500 no memory operand, ...", reasons
    /// with no samples left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let share = if self.samples == 0 {
            0.0
        } else {
            100.0 * self.with_address() as f64 / self.samples as f64
        };
        write!(
            f,
            "{} of {} samples ({share:.1}%) have a data address",
            self.with_address(),
            self.samples
        )?;
        let mut sep = "; ";
        for reason in NoAccess::ALL {
            let n = self.count(reason);
            if n > 0 {
                write!(f, "{sep}{n} {reason}")?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

/// A register operand as the sample's register file holds it: `(regs[index] >> shift) & mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegRef {
    index: u8,
    shift: u8,
    mask: u64,
}

impl RegRef {
    /// The general-purpose register `reg` (any width) in the sample's register file; `None`
    /// for any other register.
    fn of(reg: Register) -> Option<Self> {
        if !reg.is_gpr() {
            return None;
        }
        // iced numbers the 64-bit registers in the hardware order the sample uses.
        let index = u8::try_from(reg.full_register().number()).ok()?;
        let high_byte = matches!(
            reg,
            Register::AH | Register::CH | Register::DH | Register::BH
        );
        let mask = match reg.size() {
            1 => 0xff,
            2 => 0xffff,
            4 => 0xffff_ffff,
            _ => u64::MAX,
        };
        Some(Self {
            index,
            shift: if high_byte { 8 } else { 0 },
            mask,
        })
    }

    #[inline]
    fn value(self, regs: &impl Regs) -> u64 {
        (regs.reg(usize::from(self.index)) >> self.shift) & self.mask
    }
}

/// What one decoded instruction does with memory, without the register values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    /// No single address.
    None(NoAccess),
    /// `segment + base + index * scale + disp`, cut to 32 bits first with 32-bit addressing.
    Mem {
        base: Option<RegRef>,
        index: Option<RegRef>,
        scale: u8,
        /// Displacement, or the absolute address for RIP-relative operands.
        disp: u64,
        addr32: bool,
        gs: bool,
        size: u32,
        kind: AccessKind,
    },
}

impl Template {
    #[inline]
    fn apply(&self, regs: &impl Regs, gs_base: u64) -> DecodeOutcome {
        match *self {
            Self::None(reason) => DecodeOutcome::None(reason),
            Self::Mem {
                base,
                index,
                scale,
                disp,
                addr32,
                gs,
                size,
                kind,
            } => {
                let mut addr = disp;
                if let Some(b) = base {
                    addr = addr.wrapping_add(b.value(regs));
                }
                if let Some(i) = index {
                    addr = addr.wrapping_add(i.value(regs).wrapping_mul(u64::from(scale)));
                }
                if addr32 {
                    addr &= 0xffff_ffff;
                }
                if gs {
                    addr = addr.wrapping_add(gs_base);
                }
                DecodeOutcome::Access(MemAccess {
                    addr,
                    size,
                    kind,
                    gs_relative: gs,
                })
            }
        }
    }
}

/// One instruction decoded for what it does with memory: the part of decoding that does not
/// depend on register values. Access samples (bytes captured with the sample) and history hits
/// (bytes from the profile's Text section) both go through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodedInsn {
    /// Its address.
    pub ip: u64,
    /// Bytes it takes.
    pub len: u8,
    mnemonic: Mnemonic,
    template: Template,
    /// It writes a register its memory operand's address is made of.
    writes_address_register: bool,
    /// A string instruction (`movs`, `stos`, ...; with or without `rep`).
    string_op: bool,
}

impl DecodedInsn {
    /// The address just after it.
    #[must_use]
    pub const fn end(&self) -> u64 {
        self.ip.wrapping_add(self.len as u64)
    }

    /// The mnemonic in lower case.
    #[must_use]
    pub fn mnemonic(&self) -> String {
        format!("{:?}", self.mnemonic).to_ascii_lowercase()
    }

    /// Its memory access with these register values (and `%gs` base), or why it has no
    /// single one.
    #[must_use]
    pub fn access(&self, regs: &[u64; SAMPLE_REGS], gs_base: u64) -> DecodeOutcome {
        self.template.apply(regs, gs_base)
    }

    /// True when the instruction overwrites a base or index register of its memory operand
    /// (`mov 0x8(%rax),%rax`): registers captured *after* it executed (a debug-register trap,
    /// PEBS) no longer give the address it accessed.
    #[must_use]
    pub const fn writes_address_register(&self) -> bool {
        self.writes_address_register
    }

    /// True for string instructions (`movs`, `stos`, `lods`, `cmps`, `scas`), whose `rep`
    /// forms trap with the instruction pointer still on them while iterations remain.
    #[must_use]
    pub const fn is_string_op(&self) -> bool {
        self.string_op
    }

    /// Read, write or both, when the instruction has one memory operand this decoder names.
    #[must_use]
    pub const fn kind(&self) -> Option<AccessKind> {
        match self.template {
            Template::Mem { kind, .. } => Some(kind),
            Template::None(_) => None,
        }
    }

    /// Bytes its memory operand covers, when it has one this decoder names.
    #[must_use]
    pub const fn size(&self) -> Option<u32> {
        match self.template {
            Template::Mem { size, .. } => Some(size),
            Template::None(_) => None,
        }
    }
}

/// One decoded instruction in the sample cache, with the bytes it was decoded from.
#[derive(Clone, Copy, Debug)]
struct CachedInsn {
    /// The instruction's bytes, zero past its length, as one little-endian number.
    bytes: u128,
    insn: DecodedInsn,
}

impl CachedInsn {
    /// Whether `sample` holds the same instruction (code can be patched at run time: static
    /// keys, alternatives, ftrace).
    /// One masked 16-byte comparison: a slice comparison of a few bytes is a `memcmp` call,
    /// and this runs for every sample.
    #[inline]
    fn matches(&self, sample: &(impl SampleFields + ?Sized)) -> bool {
        sample.insn_len() >= self.insn.len
            && u128::from_le_bytes(sample.insn()) & len_mask(self.insn.len) == self.bytes
    }
}

// `CachedInsn::bytes` holds a whole instruction field.
const _: () = assert!(SAMPLE_INSN_BYTES == 16);

/// The low `len` bytes of a `u128` (all of them from 16 on).
#[inline]
fn len_mask(len: u8) -> u128 {
    u128::MAX
        .checked_shr(128 - 8 * u32::from(len.min(16)))
        .unwrap_or(0)
}

/// Distinct instructions kept before the cache starts over (kernel text has far fewer hot
/// instructions; this only bounds memory on hostile input).
const MAX_CACHED: usize = 1 << 20;

/// Decodes samples, caching decoded instructions by ip (and bytes) so that a hot instruction
/// is decoded once.
pub struct Decoder {
    /// By ip; `None` only transiently. A table that can prefetch a bucket
    /// ([`Decoder::prefetch`]): the next sample's instruction is looked up ahead of it.
    cache: Table<u64, Option<CachedInsn>>,
    /// The instruction at ip `u64::MAX`, the table's vacant key (hostile input only).
    at_max_ip: Option<CachedInsn>,
    info: InstructionInfoFactory,
    stats: DecodeStats,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            cache: Table::default(),
            at_max_ip: None,
            info: InstructionInfoFactory::new(),
            stats: DecodeStats::default(),
        }
    }
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("cached", &self.cache.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder with an empty cache.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The memory access of `sample`'s instruction, or why there is none. Counted in
    /// [`Decoder::stats`].
    pub fn access(&mut self, sample: &(impl SampleFields + ?Sized)) -> DecodeOutcome {
        let outcome = match self.cached(sample) {
            Ok(cached) => cached
                .insn
                .template
                .apply(&SampleRegs(sample), sample.gs_base()),
            Err(reason) => DecodeOutcome::None(reason),
        };
        self.stats.record(&outcome);
        outcome
    }

    /// The instruction `sample` executed (length and mnemonic), decoded or from the cache;
    /// `None` for user-mode samples and when it does not decode. Not counted in the stats.
    pub fn instruction(&mut self, sample: &(impl SampleFields + ?Sized)) -> Option<Insn> {
        let cached = self.cached(sample).ok()?;
        Some(Insn {
            len: cached.insn.len,
            mnemonic: cached.insn.mnemonic,
        })
    }

    /// Samples per outcome so far.
    #[must_use]
    pub const fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Distinct instructions in the cache.
    #[must_use]
    pub fn cached_instructions(&self) -> usize {
        self.cache.len() + usize::from(self.at_max_ip.is_some())
    }

    /// Asks the CPU to bring in the cache entry of the instruction at `ip`, for a sample
    /// decoded soon.
    #[inline]
    pub fn prefetch(&self, ip: u64) {
        self.cache.prefetch(ip);
    }

    #[inline]
    fn cached(&mut self, sample: &(impl SampleFields + ?Sized)) -> Result<&CachedInsn, NoAccess> {
        if sample.flags() & SAMPLE_USER != 0 {
            return Err(NoAccess::UserMode);
        }
        if sample.insn_len() == 0 {
            return Err(NoAccess::NoBytes);
        }
        let ip = sample.ip();
        if self.cache.len() >= MAX_CACHED || ip == u64::VACANT {
            return self.cached_apart(sample);
        }
        // One probe per sample.
        let i = self.cache.index_or_default(ip);
        let cached = self.cache.at(i).and_then(Option::as_ref);
        if !cached.is_some_and(|c| c.matches(sample)) {
            let new = cached.is_none();
            match decode_one(&mut self.info, sample) {
                Ok(insn) => {
                    if let Some(entry) = self.cache.at_mut(i) {
                        *entry = Some(insn);
                    }
                    self.stats.decoded += 1;
                }
                Err(why) => {
                    // An instruction that does not decode is not cached (a patched one keeps
                    // its old entry).
                    if new {
                        self.cache.remove(ip);
                    }
                    return Err(why);
                }
            }
        }
        self.cache
            .at(i)
            .and_then(Option::as_ref)
            .ok_or(NoAccess::Undecodable)
    }

    /// [`Decoder::cached`] once the cache is full (a miss that decodes starts it over), and
    /// for the one ip the table cannot hold.
    #[cold]
    fn cached_apart(
        &mut self,
        sample: &(impl SampleFields + ?Sized),
    ) -> Result<&CachedInsn, NoAccess> {
        let ip = sample.ip();
        if ip == u64::VACANT {
            if !self.at_max_ip.as_ref().is_some_and(|c| c.matches(sample)) {
                self.at_max_ip = Some(decode_one(&mut self.info, sample)?);
                self.stats.decoded += 1;
            }
            return self.at_max_ip.as_ref().ok_or(NoAccess::Undecodable);
        }
        let hit = self
            .cache
            .get(ip)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.matches(sample));
        if !hit {
            let insn = decode_one(&mut self.info, sample)?;
            self.stats.decoded += 1;
            self.cache = Table::default();
            *self.cache.get_or_default(ip) = Some(insn);
        }
        self.cache
            .get(ip)
            .and_then(Option::as_ref)
            .ok_or(NoAccess::Undecodable)
    }
}

/// Decodes the instruction of `sample` into a cache entry.
fn decode_one(
    factory: &mut InstructionInfoFactory,
    sample: &(impl SampleFields + ?Sized),
) -> Result<CachedInsn, NoAccess> {
    let all = sample.insn();
    let bytes = &all[..usize::from(sample.insn_len()).min(SAMPLE_INSN_BYTES)];
    let insn = decode_insn_with(factory, bytes, sample.ip())?;
    Ok(CachedInsn {
        bytes: u128::from_le_bytes(all) & len_mask(insn.len),
        insn,
    })
}

/// The registers (a bit per `dprof_abi::reg` index) that the memory operands of the
/// instruction in `bytes` at `ip` are addressed through, every operand's, implicit ones
/// (`push`, `movs`) included, and `%rsp` when it has any: what the analysis reads of a
/// sample's registers. 0 for a user-mode address (the analysis counts user-mode samples and
/// reads nothing else of them) and for bytes that do not decode.
#[must_use]
pub fn address_registers(bytes: &[u8], ip: u64) -> u16 {
    if ip >> 63 == 0 {
        return 0;
    }
    let Ok(mut decoder) = iced_x86::Decoder::try_with_ip(64, bytes, ip, DecoderOptions::NONE)
    else {
        return 0;
    };
    let mut instr = Instruction::default();
    decoder.decode_out(&mut instr);
    if instr.is_invalid() {
        return 0;
    }
    let mut factory = InstructionInfoFactory::new();
    let used = factory.info(&instr).used_memory();
    if used.is_empty() {
        return 0;
    }
    let mut mask = 1 << dprof_abi::reg::RSP;
    for memory in used {
        for reg in [memory.base(), memory.index()] {
            if let Some(r) = RegRef::of(reg) {
                mask |= 1 << r.index;
            }
        }
    }
    mask
}

/// Decodes the instruction at the start of `bytes`, which sit at address `ip`.
///
/// # Errors
/// [`NoAccess::Undecodable`] when the bytes do not hold a whole valid instruction.
pub fn decode_insn(bytes: &[u8], ip: u64) -> Result<DecodedInsn, NoAccess> {
    decode_insn_with(&mut InstructionInfoFactory::new(), bytes, ip)
}

/// [`decode_insn`] with a reusable info factory (it keeps buffers between calls).
fn decode_insn_with(
    factory: &mut InstructionInfoFactory,
    bytes: &[u8],
    ip: u64,
) -> Result<DecodedInsn, NoAccess> {
    let mut decoder = iced_x86::Decoder::try_with_ip(64, bytes, ip, DecoderOptions::NONE)
        .map_err(|_| NoAccess::Undecodable)?;
    let mut instr = Instruction::default();
    decoder.decode_out(&mut instr);
    if instr.is_invalid() || decoder.last_error() != iced_x86::DecoderError::None {
        return Err(NoAccess::Undecodable);
    }
    let len = u8::try_from(instr.len()).map_err(|_| NoAccess::Undecodable)?;
    if usize::from(len) > bytes.len() {
        return Err(NoAccess::Undecodable);
    }
    let template = template(factory, &instr);
    Ok(DecodedInsn {
        ip,
        len,
        mnemonic: instr.mnemonic(),
        template,
        writes_address_register: writes_address_register(factory, &instr),
        string_op: instr.is_string_instruction(),
    })
}

/// The lengths of the instructions of `code` (at address `ip`), decoded one after the other
/// from its start: the instruction boundaries of a function. Stops at the first invalid
/// instruction (data, or bytes that are not code), so every boundary returned is real.
#[must_use]
pub fn instruction_boundaries(code: &[u8], ip: u64) -> Vec<(u64, u8)> {
    let mut out = Vec::new();
    let mut decoder = iced_x86::Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut instr);
        if instr.is_invalid() {
            break;
        }
        let Ok(len) = u8::try_from(instr.len()) else {
            break;
        };
        out.push((instr.ip(), len));
    }
    out
}

/// Whether `instr` writes a general-purpose register its memory operand's address uses.
fn writes_address_register(factory: &mut InstructionInfoFactory, instr: &Instruction) -> bool {
    let address_regs =
        [instr.memory_base(), instr.memory_index()].map(|r| r.is_gpr().then(|| r.full_register()));
    if address_regs.iter().all(Option::is_none) {
        return false;
    }
    factory.info(instr).used_registers().iter().any(|used| {
        matches!(
            used.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) && used.register().is_gpr()
            && address_regs.contains(&Some(used.register().full_register()))
    })
}

/// What `instr` does with memory.
fn template(factory: &mut InstructionInfoFactory, instr: &Instruction) -> Template {
    let mut explicit = 0;
    let mut implicit = false;
    for op in 0..instr.op_count() {
        match instr.op_kind(op) {
            OpKind::Memory => explicit += 1,
            OpKind::MemorySegSI
            | OpKind::MemorySegESI
            | OpKind::MemorySegRSI
            | OpKind::MemorySegDI
            | OpKind::MemorySegEDI
            | OpKind::MemorySegRDI
            | OpKind::MemoryESDI
            | OpKind::MemoryESEDI
            | OpKind::MemoryESRDI => implicit = true,
            _ => {}
        }
    }
    let mnemonic = instr.mnemonic();
    if matches!(mnemonic, Mnemonic::Nop | Mnemonic::Fnop) {
        // Multi-byte nops have a ModRM memory form that touches nothing.
        return Template::None(NoAccess::NoMemoryOperand);
    }
    if mnemonic == Mnemonic::Lea {
        return Template::None(NoAccess::AddressOnly);
    }
    if mnemonic == Mnemonic::Xlatb {
        return Template::None(NoAccess::MultipleMemoryOperands);
    }
    let used = factory.info(instr).used_memory();
    if implicit || explicit > 1 || used.len() > 1 || (explicit == 0 && !used.is_empty()) {
        return Template::None(NoAccess::MultipleMemoryOperands);
    }
    if explicit == 0 {
        return Template::None(NoAccess::NoMemoryOperand);
    }
    let Some(mem) = used.first() else {
        // An explicit operand iced reports no use for: it computes an address only.
        return Template::None(NoAccess::AddressOnly);
    };
    let kind = match mem.access() {
        OpAccess::Read | OpAccess::CondRead => AccessKind::Read,
        OpAccess::Write | OpAccess::CondWrite => AccessKind::Write,
        OpAccess::ReadWrite | OpAccess::ReadCondWrite => AccessKind::ReadWrite,
        OpAccess::NoMemAccess => return Template::None(NoAccess::AddressOnly),
        // An operand with no access at all: nothing touched.
        OpAccess::None => return Template::None(NoAccess::NoMemoryOperand),
    };
    let gs = match instr.memory_segment() {
        Register::GS => true,
        Register::FS => return Template::None(NoAccess::UnsupportedSegment),
        _ => false,
    };
    let size = u32::try_from(instr.memory_size().size()).unwrap_or(u32::MAX);
    let base_reg = instr.memory_base();
    let index_reg = instr.memory_index();
    if index_reg.is_vector_register() {
        // VSIB (gathers, scatters): one address per element.
        return Template::None(NoAccess::MultipleMemoryOperands);
    }
    let addr32 = base_reg.is_gpr32()
        || index_reg.is_gpr32()
        || base_reg == Register::EIP
        || mem.address_size() == iced_x86::CodeSize::Code32;
    let (base, disp) = if instr.is_ip_rel_memory_operand() {
        (None, instr.ip_rel_memory_address())
    } else {
        (RegRef::of(base_reg), instr.memory_displacement64())
    };
    if (base_reg != Register::None && base.is_none() && !instr.is_ip_rel_memory_operand())
        || (index_reg != Register::None && RegRef::of(index_reg).is_none())
    {
        // A base or index that is no general-purpose register: not computable here.
        return Template::None(NoAccess::Undecodable);
    }
    Template::Mem {
        base,
        index: RegRef::of(index_reg),
        scale: u8::try_from(instr.memory_index_scale()).unwrap_or(1),
        disp,
        addr32,
        gs,
        size,
        kind,
    }
}
