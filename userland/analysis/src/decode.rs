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
//! What an instruction accesses: every memory location iced's `used_memory` names, explicit
//! or implicit, up to two of them: `mov` and friends have one; `push`/`pop`, `call`/`ret`,
//! `leave` and the string instructions touch the stack or `%rsi`/`%rdi` implicitly, and
//! `push (%rax)`, `call *(%rax)`, `movs` and `cmps` touch two locations
//! ([`DecodeOutcome::Two`]), each with its own address. Only instructions with more (`enter`
//! with nesting levels) or with one address per vector element (gathers, scatters) stay
//! [`NoAccess::MultipleMemoryOperands`].

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
    /// The process (thread group) the sampled CPU was running.
    fn pid(&self) -> u32;
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
    #[inline]
    fn pid(&self) -> u32 {
        self.pid
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
    #[inline]
    fn pid(&self) -> u32 {
        AccessSampleView::pid(self)
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

/// A memory operand `displacement(%register)` ([`Decoder::base_operand`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseOperand {
    /// The base register, as the sample's register file numbers it (`dprof_abi::reg`).
    pub register: u8,
    /// The displacement.
    pub displacement: i64,
}

impl BaseOperand {
    /// The base register's DWARF number (x86-64 psABI: `%rax`, `%rdx`, `%rcx`, `%rbx`,
    /// `%rsi`, `%rdi`, `%rbp`, `%rsp`, then `%r8`-`%r15`).
    #[must_use]
    pub const fn dwarf_register(self) -> u16 {
        // By `dprof_abi::reg` index: rax rcx rdx rbx rsp rbp rsi rdi.
        const DWARF: [u16; 8] = [0, 2, 1, 3, 7, 6, 4, 5];
        if (self.register as usize) < DWARF.len() {
            DWARF[self.register as usize]
        } else {
            self.register as u16
        }
    }
}

/// Why a sample yields no data address (counted, never guessed).
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
    /// More memory locations than two, or one per vector element: gathers and scatters,
    /// `enter` with nesting levels.
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
    /// The coverage bucket of a sample the decoder found no data address in.
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
            Self::MultipleMemoryOperands => "more memory locations than two (gathers, enter)",
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
    /// Two memory locations, in operand order: the explicit operand before the stack (`push
    /// (%rax)` reads `(%rax)`, then writes the stack), `movs`'s destination before its source.
    Two([MemAccess; 2]),
    /// No data address, and why.
    None(NoAccess),
}

impl DecodeOutcome {
    /// The accesses, first operand first (none for [`DecodeOutcome::None`]).
    #[must_use]
    pub fn accesses(&self) -> &[MemAccess] {
        match self {
            Self::Access(a) => std::slice::from_ref(a),
            Self::Two(two) => two,
            Self::None(_) => &[],
        }
    }
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
    /// Of the samples with an address, those whose instruction accessed a second location
    /// (counted above by its first).
    pub second_operands: u64,
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
        match outcome.accesses() {
            [] => {
                if let DecodeOutcome::None(reason) = outcome {
                    *self.count_mut(*reason) += 1;
                }
            }
            [a, rest @ ..] => {
                match a.kind {
                    AccessKind::Read => self.reads += 1,
                    AccessKind::Write => self.writes += 1,
                    AccessKind::ReadWrite => self.read_writes += 1,
                }
                self.gs_relative += u64::from(a.gs_relative);
                self.second_operands += u64::from(!rest.is_empty());
            }
        }
    }

    /// Adds `other`'s counts to these (for decoders run over parts of a profile).
    pub fn merge(&mut self, other: &Self) {
        self.samples += other.samples;
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_writes += other.read_writes;
        self.gs_relative += other.gs_relative;
        self.second_operands += other.second_operands;
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
        if self.second_operands > 0 {
            write!(f, " ({} of them at two locations)", self.second_operands)?;
        }
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

/// One memory location an instruction accesses, without the register values:
/// `segment + base + index * scale + disp`, cut to 32 bits first with 32-bit addressing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Operand {
    base: Option<RegRef>,
    index: Option<RegRef>,
    scale: u8,
    /// Displacement, or the absolute address for RIP-relative operands.
    disp: u64,
    addr32: bool,
    gs: bool,
    size: u32,
    kind: AccessKind,
}

impl Operand {
    #[inline]
    fn apply(&self, regs: &impl Regs, gs_base: u64) -> MemAccess {
        let mut addr = self.disp;
        if let Some(b) = self.base {
            addr = addr.wrapping_add(b.value(regs));
        }
        if let Some(i) = self.index {
            addr = addr.wrapping_add(i.value(regs).wrapping_mul(u64::from(self.scale)));
        }
        if self.addr32 {
            addr &= 0xffff_ffff;
        }
        if self.gs {
            addr = addr.wrapping_add(gs_base);
        }
        MemAccess {
            addr,
            size: self.size,
            kind: self.kind,
            gs_relative: self.gs,
        }
    }
}

/// What one decoded instruction does with memory, without the register values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    /// No address.
    None(NoAccess),
    One(Operand),
    Two([Operand; 2]),
}

impl Template {
    #[inline]
    fn apply(&self, regs: &impl Regs, gs_base: u64) -> DecodeOutcome {
        match self {
            Self::None(reason) => DecodeOutcome::None(*reason),
            Self::One(op) => DecodeOutcome::Access(op.apply(regs, gs_base)),
            Self::Two([a, b]) => {
                DecodeOutcome::Two([a.apply(regs, gs_base), b.apply(regs, gs_base)])
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
    /// It accesses memory through an operand its encoding does not name: the stack (`push`,
    /// `call`, `ret`) or `%rsi`/`%rdi` (string instructions).
    implicit_operand: bool,
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

    /// The registers (a bit per `dprof_abi::reg` index) [`DecodedInsn::access`] reads: the
    /// base and index registers of every location it accesses, implicit ones included; 0
    /// when it accesses none.
    #[must_use]
    pub fn address_registers(&self) -> u16 {
        let operands: &[Operand] = match &self.template {
            Template::None(_) => &[],
            Template::One(op) => std::slice::from_ref(op),
            Template::Two(ops) => ops,
        };
        operands
            .iter()
            .flat_map(|op| [op.base, op.index])
            .flatten()
            .fold(0, |mask, r| mask | (1 << r.index))
    }

    /// True when the instruction overwrites a base or index register of its memory operand
    /// (`mov 0x8(%rax),%rax`): registers captured *after* it executed (a debug-register trap,
    /// PEBS) no longer give the address it accessed.
    #[must_use]
    pub const fn writes_address_register(&self) -> bool {
        self.writes_address_register
    }

    /// True when it accesses memory through an operand its encoding does not name (the stack
    /// of `push`, `call` and `ret`; `%rsi`/`%rdi` of string instructions), whose registers
    /// it moves on: registers captured after it executed no longer give that address.
    #[must_use]
    pub const fn has_implicit_operand(&self) -> bool {
        self.implicit_operand
    }

    /// True for string instructions (`movs`, `stos`, `lods`, `cmps`, `scas`), whose `rep`
    /// forms trap with the instruction pointer still on them while iterations remain.
    #[must_use]
    pub const fn is_string_op(&self) -> bool {
        self.string_op
    }

    /// Read, write or both, when the instruction accesses one memory location (with two, a
    /// trap does not say which of them it was).
    #[must_use]
    pub const fn kind(&self) -> Option<AccessKind> {
        match self.template {
            Template::One(op) => Some(op.kind),
            Template::None(_) | Template::Two(_) => None,
        }
    }

    /// Bytes its memory location covers, when it accesses one.
    #[must_use]
    pub const fn size(&self) -> Option<u32> {
        match self.template {
            Template::One(op) => Some(op.size),
            Template::None(_) | Template::Two(_) => None,
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

    /// The one memory operand of the cached instruction at `ip` when it is `disp(%base)`: a
    /// 64-bit base register other than `%rsp`, no index, no segment. What typing an access by
    /// its instruction reads (the struct the base register points to, the member at `disp`).
    #[must_use]
    pub fn base_operand(&self, ip: u64) -> Option<BaseOperand> {
        let cached = if ip == u64::VACANT {
            self.at_max_ip.as_ref()
        } else {
            self.cache.get(ip).and_then(Option::as_ref)
        }?;
        let Template::One(op) = cached.insn.template else {
            return None;
        };
        let base = op.base?;
        let full = base.mask == u64::MAX && base.shift == 0;
        let plain = op.index.is_none() && !op.gs && !op.addr32;
        // iced gives the displacement sign-extended to 64 bits.
        (full && plain && usize::from(base.index) != dprof_abi::reg::RSP).then_some(BaseOperand {
            register: base.index,
            displacement: op.disp.cast_signed(),
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
    let explicit = (0..instr.op_count())
        .filter(|&op| instr.op_kind(op) == OpKind::Memory)
        .count();
    let locations = match template {
        Template::None(_) => 0,
        Template::One(_) => 1,
        Template::Two(_) => 2,
    };
    Ok(DecodedInsn {
        ip,
        len,
        mnemonic: instr.mnemonic(),
        template,
        writes_address_register: writes_address_register(factory, &instr),
        string_op: instr.is_string_instruction(),
        implicit_operand: locations > explicit,
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

/// The addresses of the `%gs:` memory operands with no base or index register in `code` (at
/// address `ip`), decoded one instruction after the other; where bytes do not decode, the
/// decoder moves on past them. On x86-64 these operands address static per-CPU variables
/// (see [`crate::percpu_section`]); a RIP-relative one gives the address it computes.
#[must_use]
pub fn gs_operand_addresses(code: &[u8], ip: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut decoder = iced_x86::Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut instr);
        if instr.is_invalid() || instr.memory_segment() != Register::GS {
            continue;
        }
        let has_memory_operand =
            (0..instr.op_count()).any(|op| instr.op_kind(op) == OpKind::Memory);
        if has_memory_operand
            && instr.memory_index() == Register::None
            && matches!(instr.memory_base(), Register::None | Register::RIP)
        {
            out.push(instr.memory_displacement64());
        }
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
    let mnemonic = instr.mnemonic();
    if matches!(mnemonic, Mnemonic::Nop | Mnemonic::Fnop) {
        // Multi-byte nops have a ModRM memory form that touches nothing.
        return Template::None(NoAccess::NoMemoryOperand);
    }
    let has_memory_operand = (0..instr.op_count()).any(|op| {
        matches!(
            instr.op_kind(op),
            OpKind::Memory
                | OpKind::MemorySegSI
                | OpKind::MemorySegESI
                | OpKind::MemorySegRSI
                | OpKind::MemorySegDI
                | OpKind::MemorySegEDI
                | OpKind::MemorySegRDI
                | OpKind::MemoryESDI
                | OpKind::MemoryESEDI
                | OpKind::MemoryESRDI
        )
    });
    // iced leaves out operands that compute an address without accessing memory (`lea`,
    // prefetches): what is left is every location touched, implicit ones (the stack of
    // `push` and `call`) included.
    let used = factory.info(instr).used_memory();
    let mut operands = [None, None];
    for (slot, mem) in operands.iter_mut().zip(used) {
        *slot = match operand(mem, instr) {
            Ok(op) => Some(op),
            Err(reason) => return Template::None(reason),
        };
    }
    match (used.len(), operands) {
        (0, _) if has_memory_operand || mnemonic == Mnemonic::Lea => {
            Template::None(NoAccess::AddressOnly)
        }
        (0, _) => Template::None(NoAccess::NoMemoryOperand),
        (1, [Some(op), _]) => Template::One(op),
        (2, [Some(a), Some(b)]) => Template::Two([a, b]),
        _ => Template::None(NoAccess::MultipleMemoryOperands),
    }
}

/// One location iced says `instr` uses.
fn operand(mem: &iced_x86::UsedMemory, instr: &Instruction) -> Result<Operand, NoAccess> {
    if mem.index().is_vector_register() {
        // VSIB (gathers, scatters): one address per element.
        return Err(NoAccess::MultipleMemoryOperands);
    }
    let kind = match mem.access() {
        OpAccess::Read | OpAccess::CondRead => AccessKind::Read,
        OpAccess::Write | OpAccess::CondWrite => AccessKind::Write,
        OpAccess::ReadWrite | OpAccess::ReadCondWrite => AccessKind::ReadWrite,
        OpAccess::NoMemAccess => return Err(NoAccess::AddressOnly),
        // An operand with no access at all: nothing touched.
        OpAccess::None => return Err(NoAccess::NoMemoryOperand),
    };
    let gs = match mem.segment() {
        Register::GS => true,
        Register::FS => return Err(NoAccess::UnsupportedSegment),
        _ => false,
    };
    // iced gives a RIP-relative operand as no base and the absolute address.
    let (base, index) = (RegRef::of(mem.base()), RegRef::of(mem.index()));
    if (mem.base() != Register::None && base.is_none())
        || (mem.index() != Register::None && index.is_none())
    {
        // A base or index that is no general-purpose register: not computable here.
        return Err(NoAccess::Undecodable);
    }
    Ok(Operand {
        base,
        index,
        scale: u8::try_from(mem.scale()).unwrap_or(1),
        disp: mem.displacement(),
        addr32: mem.address_size() == iced_x86::CodeSize::Code32,
        gs,
        // A `rep` string instruction's location has no size (its count is in %rcx); the
        // sample is one iteration, one element.
        size: u32::try_from(match mem.memory_size().size() {
            0 => instr.memory_size().size(),
            n => n,
        })
        .unwrap_or(u32::MAX),
        kind,
    })
}
