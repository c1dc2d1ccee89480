// SPDX-License-Identifier: GPL-2.0

//! x86-64 debug registers: typed encoding and decoding of DR7 (control) and DR6 (status), and
//! the address rules for DR0..DR3 watches.
//!
//! This file is self-contained and uses only `core`: the kernel module includes it with
//! `#[path = ".../debugreg/src/dr.rs"] mod debugreg;`, and the `dprof-debugreg` crate
//! re-exports it for userland. It never panics and never overflows (the kernel builds with
//! overflow checks), and most of it is `const fn` so the module can build register values in
//! constants.
//!
//! Layouts follow the Intel SDM vol. 3, "Debug Registers", and match Linux 6.12
//! (`arch/x86/include/uapi/asm/debugreg.h`, `arch/x86/kernel/hw_breakpoint.c`,
//! `arch/x86/kernel/traps.c`):
//!
//! ```text
//! DR7:  63..32 must be zero (MOV to DR7 with any of them set raises #GP)
//!       31..16 four 4-bit fields, slot n at bits 16+4n: R/Wn (low 2 bits), LENn (high 2 bits)
//!       15..14 reserved 0, 13 GD, 12 reserved 0, 11 RTM, 10 reserved 1 (reads as 1)
//!        9 GE, 8 LE, 7..0 G3 L3 G2 L2 G1 L1 G0 L0
//! DR6:  B0..B3 at bits 0..3, BLD 11 (active low), BD 13, BS 14, BT 15, RTM 16 (active low);
//!       the other bits of 31..0 read as 1 except 12 (reads as 0); 63..32 read as 0.
//! ```

use core::fmt;

/// One of the four breakpoint slots (DR0..DR3 hold the addresses, DR7 the controls).
///
/// A newtype so that a slot index is checked once, at construction, and every shift computed
/// from it afterwards is in range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(u8);

impl Slot {
    /// Number of breakpoint slots on x86 (`HBP_NUM` in the kernel).
    pub const COUNT: usize = 4;
    /// DR0.
    pub const DR0: Slot = Slot(0);
    /// DR1.
    pub const DR1: Slot = Slot(1);
    /// DR2.
    pub const DR2: Slot = Slot(2);
    /// DR3.
    pub const DR3: Slot = Slot(3);
    /// All slots, in register order.
    pub const ALL: [Slot; Slot::COUNT] = [Slot::DR0, Slot::DR1, Slot::DR2, Slot::DR3];

    /// The slot with this index.
    ///
    /// # Errors
    /// [`Error::BadSlot`] unless `index` is 0..=3.
    pub const fn new(index: u8) -> Result<Slot, Error> {
        if index < 4 {
            Ok(Slot(index))
        } else {
            Err(Error::BadSlot(index))
        }
    }

    /// The register number, 0..=3.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The register number as an array index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Shift of this slot's L bit in DR7 (its G bit is the next one up).
    const fn enable_shift(self) -> u32 {
        2 * self.0 as u32
    }

    /// Shift of this slot's 4-bit R/W+LEN field in DR7.
    const fn field_shift(self) -> u32 {
        16 + 4 * self.0 as u32
    }
}

/// What kind of access a slot triggers on: the R/W field of DR7.
///
/// Encoding `0b10` is deliberately absent. It means an I/O-port breakpoint only when CR4.DE is
/// set and is undefined otherwise; Linux clears CR4.DE on x86-64 (`cpu_init`), its
/// `hw_breakpoint` layer never encodes it (`arch_build_bp_info` accepts only X, W and W|R), and
/// it watches port numbers rather than memory, which is useless for data profiling. Decoding
/// it yields [`Error::IoCondition`].
///
/// There is no read-only condition on x86: [`Condition::ReadWrite`] is the closest (the kernel
/// calls it `DR_RW_READ`, but it also fires on writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    /// Instruction fetch (`DR_RW_EXECUTE`, 0b00). A fault, reported before the instruction
    /// runs; the length must be [`Length::One`].
    Execute,
    /// Data writes (`DR_RW_WRITE`, 0b01). A trap, reported after the writing instruction.
    Write,
    /// Data reads or writes, not instruction fetches (`DR_RW_READ`, 0b11). A trap.
    ReadWrite,
}

impl Condition {
    /// All conditions.
    pub const ALL: [Condition; 3] = [Condition::Execute, Condition::Write, Condition::ReadWrite];

    /// The 2-bit R/W encoding.
    #[must_use]
    pub const fn encoding(self) -> u8 {
        match self {
            Condition::Execute => 0b00,
            Condition::Write => 0b01,
            Condition::ReadWrite => 0b11,
        }
    }

    /// Decodes a 2-bit R/W field.
    ///
    /// # Errors
    /// [`Error::IoCondition`] for 0b10, [`Error::FieldOutOfRange`] above 0b11.
    pub const fn from_encoding(bits: u8) -> Result<Condition, Error> {
        match bits {
            0b00 => Ok(Condition::Execute),
            0b01 => Ok(Condition::Write),
            0b11 => Ok(Condition::ReadWrite),
            0b10 => Err(Error::IoCondition),
            _ => Err(Error::FieldOutOfRange(bits)),
        }
    }
}

/// How many bytes a slot watches: the LEN field of DR7.
///
/// The encoding is not monotonic: 8 bytes is 0b10 (defined only in 64-bit mode) and 4 bytes is
/// 0b11, as in the kernel's `DR_LEN_8` (0x8) and `DR_LEN_4` (0xC), which are pre-shifted by 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Length {
    /// 1 byte (0b00); also the only length for execute breakpoints.
    One,
    /// 2 bytes (0b01).
    Two,
    /// 4 bytes (0b11).
    Four,
    /// 8 bytes (0b10).
    Eight,
}

impl Length {
    /// All lengths, shortest first.
    pub const ALL: [Length; 4] = [Length::One, Length::Two, Length::Four, Length::Eight];

    /// Number of bytes watched.
    #[must_use]
    pub const fn bytes(self) -> u64 {
        match self {
            Length::One => 1,
            Length::Two => 2,
            Length::Four => 4,
            Length::Eight => 8,
        }
    }

    /// The length for a byte count.
    ///
    /// # Errors
    /// [`Error::BadLength`] unless `bytes` is 1, 2, 4 or 8. (AMD's range breakpoints, which
    /// the kernel supports through an address-mask MSR, are not modelled here.)
    pub const fn from_bytes(bytes: u64) -> Result<Length, Error> {
        match bytes {
            1 => Ok(Length::One),
            2 => Ok(Length::Two),
            4 => Ok(Length::Four),
            8 => Ok(Length::Eight),
            _ => Err(Error::BadLength(bytes)),
        }
    }

    /// The 2-bit LEN encoding.
    #[must_use]
    pub const fn encoding(self) -> u8 {
        match self {
            Length::One => 0b00,
            Length::Two => 0b01,
            Length::Four => 0b11,
            Length::Eight => 0b10,
        }
    }

    /// Decodes a 2-bit LEN field (every value is defined on x86-64).
    ///
    /// # Errors
    /// [`Error::FieldOutOfRange`] above 0b11.
    pub const fn from_encoding(bits: u8) -> Result<Length, Error> {
        match bits {
            0b00 => Ok(Length::One),
            0b01 => Ok(Length::Two),
            0b11 => Ok(Length::Four),
            0b10 => Ok(Length::Eight),
            _ => Err(Error::FieldOutOfRange(bits)),
        }
    }
}

/// Why a value could not be built or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// A slot index other than 0..=3.
    BadSlot(u8),
    /// A byte length other than 1, 2, 4 or 8.
    BadLength(u64),
    /// The address is not a multiple of the length. The CPU ignores the low address bits for
    /// longer lengths, so such a watch would silently cover different bytes.
    Misaligned {
        /// The requested address.
        address: u64,
        /// The requested length.
        length: Length,
    },
    /// An execute breakpoint longer than one byte (undefined behaviour per the SDM).
    ExecuteLength(Length),
    /// R/W encoding 0b10: an I/O breakpoint (CR4.DE=1) or undefined (CR4.DE=0).
    IoCondition,
    /// A 2-bit field value above 0b11.
    FieldOutOfRange(u8),
    /// DR7 bits that must be zero are set (63..32, 15, 14, 12); the value holds those bits.
    ReservedDr7Bits(u64),
    /// A DR7 slot field that this API cannot represent.
    InvalidDr7Slot {
        /// The slot.
        slot: Slot,
        /// Its raw R/W field.
        rw: u8,
        /// Its raw LEN field.
        len: u8,
    },
    /// `address + len` goes past the end of the address space.
    RangeOverflow {
        /// Start of the range.
        address: u64,
        /// Its length in bytes.
        len: u64,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::BadSlot(index) => {
                write!(f, "debug register slot {index} does not exist (0..=3)")
            }
            Error::BadLength(bytes) => {
                write!(f, "watch length {bytes} is not 1, 2, 4 or 8 bytes")
            }
            Error::Misaligned { address, length } => write!(
                f,
                "watch address {address:#x} is not aligned to its length of {} bytes",
                length.bytes()
            ),
            Error::ExecuteLength(length) => write!(
                f,
                "execute breakpoints must be 1 byte long, not {}",
                length.bytes()
            ),
            Error::IoCondition => {
                f.write_str("R/W encoding 0b10 (I/O breakpoint) is not supported")
            }
            Error::FieldOutOfRange(bits) => {
                write!(
                    f,
                    "2-bit debug register field value {bits:#x} is out of range"
                )
            }
            Error::ReservedDr7Bits(bits) => {
                write!(f, "DR7 has must-be-zero bits set: {bits:#x}")
            }
            Error::InvalidDr7Slot { slot, rw, len } => write!(
                f,
                "DR7 slot {} has an unsupported R/W={rw:#04b} LEN={len:#04b} combination",
                slot.get()
            ),
            Error::RangeOverflow { address, len } => write!(
                f,
                "range of {len} bytes at {address:#x} overflows the address space"
            ),
        }
    }
}

impl core::error::Error for Error {}

/// A valid breakpoint: aligned address, supported length, and a condition that allows it.
///
/// Fields are private so that every `Watch` satisfies the CPU's rules (the same ones the kernel
/// checks in `arch_build_bp_info` and `hw_breakpoint_arch_parse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Watch {
    address: u64,
    length: Length,
    condition: Condition,
}

impl Watch {
    /// A watch of `length` bytes at linear address `address`.
    ///
    /// # Errors
    /// [`Error::Misaligned`] if `address` is not a multiple of the length (the CPU would
    /// ignore the low bits); [`Error::ExecuteLength`] for an execute breakpoint longer than one
    /// byte.
    pub const fn new(address: u64, length: Length, condition: Condition) -> Result<Watch, Error> {
        if matches!(condition, Condition::Execute) && !matches!(length, Length::One) {
            return Err(Error::ExecuteLength(length));
        }
        if address & (length.bytes() - 1) != 0 {
            return Err(Error::Misaligned { address, length });
        }
        Ok(Watch {
            address,
            length,
            condition,
        })
    }

    /// Like [`Watch::new`], with the length as a byte count.
    ///
    /// # Errors
    /// [`Error::BadLength`] unless `bytes` is 1, 2, 4 or 8; otherwise as [`Watch::new`].
    pub const fn with_bytes(
        address: u64,
        bytes: u64,
        condition: Condition,
    ) -> Result<Watch, Error> {
        match Length::from_bytes(bytes) {
            Ok(length) => Watch::new(address, length, condition),
            Err(e) => Err(e),
        }
    }

    /// The linear address to load into DR0..DR3.
    #[must_use]
    pub const fn address(self) -> u64 {
        self.address
    }

    /// How many bytes are watched.
    #[must_use]
    pub const fn length(self) -> Length {
        self.length
    }

    /// What kind of access triggers.
    #[must_use]
    pub const fn condition(self) -> Condition {
        self.condition
    }

    /// Address of the last watched byte. (Alignment guarantees this does not overflow, whereas
    /// an exclusive end could be 2^64.)
    #[must_use]
    pub const fn last_byte(self) -> u64 {
        self.address + (self.length.bytes() - 1)
    }

    /// Whether an access of `size` bytes at linear address `address` falls on this watch, as
    /// far as addresses go (the kind of access is not considered: a read never triggers a
    /// [`Condition::Write`] watch, but `covers` still answers for its bytes).
    ///
    /// - Data watches ([`Condition::Write`], [`Condition::ReadWrite`]): the CPU triggers when
    ///   *any* byte of the access, `[address, address + size)`, lies in the watched bytes
    ///   `[self.address, self.address + len)`, i.e. on any overlap, so an 8-byte store that
    ///   touches one watched byte triggers, and so does a misaligned access straddling the
    ///   watch's edge.
    /// - Execute watches: `address` is the first byte of an instruction (prefixes included)
    ///   and `size` its length; the CPU triggers only when that first byte *is* the watched
    ///   address, so an instruction that merely spans it does not.
    ///
    /// A zero-byte access covers nothing. An access running past 2^64 is clamped there (it
    /// cannot happen with canonical addresses). Addresses are linear: the same memory reached
    /// through another mapping does not trigger.
    #[must_use]
    pub const fn covers(self, address: u64, size: u64) -> bool {
        if size == 0 {
            return false;
        }
        match self.condition {
            Condition::Execute => address == self.address,
            Condition::Write | Condition::ReadWrite => {
                let access_last = address.saturating_add(size - 1);
                address <= self.last_byte() && access_last >= self.address
            }
        }
    }
}

/// Free-function form of [`Watch::covers`]: does an access of `size` bytes at `address`
/// overlap `watch` (data watches), or start at it (execute watches)?
#[must_use]
pub const fn covers(watch: Watch, address: u64, size: u64) -> bool {
    watch.covers(address, size)
}

/// A set of slots, as a 4-bit mask (bit n = slot n): the shape of DR6's B0..B3 and of DR7's
/// enabled slots. Iterating yields slots in ascending order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlotSet(u8);

impl SlotSet {
    /// No slots.
    pub const EMPTY: SlotSet = SlotSet(0);
    /// All four slots.
    pub const ALL: SlotSet = SlotSet(0xF);

    /// The set with mask `bits`; bits above 3 are dropped.
    #[must_use]
    pub const fn from_mask(bits: u8) -> SlotSet {
        SlotSet(bits & 0xF)
    }

    /// The 4-bit mask.
    #[must_use]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether `slot` is in the set.
    #[must_use]
    pub const fn contains(self, slot: Slot) -> bool {
        self.0 & (1 << slot.0) != 0
    }

    /// The set plus `slot`.
    #[must_use]
    pub const fn with(self, slot: Slot) -> SlotSet {
        SlotSet(self.0 | (1 << slot.0))
    }

    /// The set minus `slot`.
    #[must_use]
    pub const fn without(self, slot: Slot) -> SlotSet {
        SlotSet(self.0 & !(1 << slot.0))
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of slots in the set.
    #[must_use]
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The lowest slot in the set, if any (e.g. the first free one of a complement).
    #[must_use]
    pub const fn first(self) -> Option<Slot> {
        if self.0 == 0 {
            None
        } else {
            Some(Slot(self.0.trailing_zeros() as u8))
        }
    }

    /// Slots not in the set.
    #[must_use]
    pub const fn complement(self) -> SlotSet {
        SlotSet(!self.0 & 0xF)
    }

    /// Iterates over the slots in ascending order.
    #[must_use]
    pub const fn iter(self) -> SlotIter {
        SlotIter(self.0)
    }
}

impl IntoIterator for SlotSet {
    type Item = Slot;
    type IntoIter = SlotIter;

    fn into_iter(self) -> SlotIter {
        SlotIter(self.0)
    }
}

/// Iterator over a [`SlotSet`], ascending.
#[derive(Clone, Debug)]
pub struct SlotIter(u8);

impl Iterator for SlotIter {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        let slot = SlotSet(self.0).first()?;
        self.0 &= self.0 - 1;
        Some(slot)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for SlotIter {}
impl core::iter::FusedIterator for SlotIter {}

/// How one DR7 slot is configured, as decoded by [`Dr7::get`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotState {
    /// The R/W field.
    pub condition: Condition,
    /// The LEN field.
    pub length: Length,
    /// Ln: enabled for the current task (the CPU clears it on a hardware task switch).
    pub local: bool,
    /// Gn: enabled for all tasks (what the kernel uses).
    pub global: bool,
}

/// The kernel's `encode_dr7(drnum, len, type)`: the slot's R/W+LEN field, its G bit, and GE
/// (`DR_GLOBAL_SLOWDOWN`), ready to OR into a DR7 value. The kernel ORs this into its per-CPU
/// `cpu_dr7` on install and removes only `__encode_dr7` (field and G, not GE) on uninstall.
///
/// # Errors
/// [`Error::ExecuteLength`] for an execute breakpoint longer than one byte.
pub const fn encode_dr7(slot: Slot, condition: Condition, length: Length) -> Result<u64, Error> {
    match Dr7::EMPTY.set(slot, condition, length) {
        Ok(dr7) => Ok(dr7.enable_global(slot).set_global_exact(true).0),
        Err(e) => Err(e),
    }
}

/// DR7, the debug control register, always holding a value this API can decode: reserved
/// must-be-zero bits are clear and every slot's R/W+LEN field is a supported combination
/// (checked for disabled slots too, since enabling one later would arm its stale field).
///
/// Values are built by value (`Dr7::new().set(..)?.enable_global(..)`) so they work in `const`.
/// Bit 10 reads as 1 on the CPU and is ignored on writes; it is kept as given (the kernel's own
/// `cpu_dr7` leaves it clear, the CPU's reset value [`Dr7::RESET`] has it set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dr7(u64);

impl Dr7 {
    /// Bit 10, reserved, reads as 1 (`DR7_FIXED_1`).
    pub const FIXED_1: u64 = 1 << 10;
    /// LE, local exact breakpoint (`DR_LOCAL_SLOWDOWN`); ignored by P6 and later CPUs.
    pub const LOCAL_EXACT: u64 = 1 << 8;
    /// GE, global exact breakpoint (`DR_GLOBAL_SLOWDOWN`); the kernel sets it in `encode_dr7`,
    /// as the SDM recommends for data breakpoints, though modern CPUs ignore it.
    pub const GLOBAL_EXACT: u64 = 1 << 9;
    /// RTM debugging enable (with `IA32_DEBUGCTL.RTM`).
    pub const RTM: u64 = 1 << 11;
    /// GD, general detect: any MOV to/from a debug register raises #DB with DR6.BD.
    pub const GENERAL_DETECT: u64 = 1 << 13;
    /// The L and G bits of all slots (`DR_LOCAL_ENABLE_MASK | DR_GLOBAL_ENABLE_MASK`).
    pub const ENABLE_MASK: u64 = 0xFF;
    /// Bits that must be zero: 63..32 (#GP on write), 15, 14 and 12.
    pub const MUST_BE_ZERO: u64 = 0xFFFF_FFFF_0000_D000;

    /// Nothing set, like the kernel's per-CPU `cpu_dr7` before any install.
    pub const EMPTY: Dr7 = Dr7(0);
    /// The architectural reset value, 0x400, which the kernel writes to disable everything
    /// (`hw_breakpoint_disable`) and which an idle CPU reads back.
    pub const RESET: Dr7 = Dr7(Dr7::FIXED_1);

    /// Same as [`Dr7::EMPTY`].
    #[must_use]
    pub const fn new() -> Dr7 {
        Dr7::EMPTY
    }

    /// Decodes a raw DR7 value (as read from the CPU, or a kernel `cpu_dr7`). Bit 10 may be
    /// either value; GD, RTM, LE and GE are kept.
    ///
    /// # Errors
    /// [`Error::ReservedDr7Bits`] if must-be-zero bits are set; [`Error::InvalidDr7Slot`] if
    /// any slot (enabled or not) has R/W=0b10 or an execute field with a length other than 1.
    pub const fn from_bits(raw: u64) -> Result<Dr7, Error> {
        let reserved = raw & Dr7::MUST_BE_ZERO;
        if reserved != 0 {
            return Err(Error::ReservedDr7Bits(reserved));
        }
        let mut i = 0;
        while i < 4 {
            let slot = Slot(i);
            let field = (raw >> slot.field_shift()) & 0xF;
            let rw = (field & 0b11) as u8;
            let len = (field >> 2) as u8;
            // 0b10 is I/O; execute needs LEN 0b00.
            if rw == 0b10 || (rw == 0b00 && len != 0b00) {
                return Err(Error::InvalidDr7Slot { slot, rw, len });
            }
            i += 1;
        }
        Ok(Dr7(raw))
    }

    /// The raw value, to write to DR7.
    #[must_use]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Sets `slot`'s R/W and LEN fields, leaving its enable bits alone.
    ///
    /// # Errors
    /// [`Error::ExecuteLength`] for an execute breakpoint longer than one byte.
    pub const fn set(self, slot: Slot, condition: Condition, length: Length) -> Result<Dr7, Error> {
        if matches!(condition, Condition::Execute) && !matches!(length, Length::One) {
            return Err(Error::ExecuteLength(length));
        }
        let field = ((length.encoding() << 2) | condition.encoding()) as u64;
        let shift = slot.field_shift();
        Ok(Dr7((self.0 & !(0xF << shift)) | (field << shift)))
    }

    /// Sets `slot`'s fields from a watch (which is valid by construction). The address goes
    /// into DR0..DR3 separately.
    #[must_use]
    pub const fn set_watch(self, slot: Slot, watch: Watch) -> Dr7 {
        let field = ((watch.length.encoding() << 2) | watch.condition.encoding()) as u64;
        let shift = slot.field_shift();
        Dr7((self.0 & !(0xF << shift)) | (field << shift))
    }

    /// The kernel's install step for `watch` in `slot`: field, G bit and GE
    /// (`*dr7 |= encode_dr7(..)` in `arch_install_hw_breakpoint`), except that the old field is
    /// replaced rather than OR-ed into.
    #[must_use]
    pub const fn install(self, slot: Slot, watch: Watch) -> Dr7 {
        self.set_watch(slot, watch)
            .enable_global(slot)
            .set_global_exact(true)
    }

    /// Sets Ln: the CPU clears it on hardware task switches (which 64-bit Linux does not use).
    #[must_use]
    pub const fn enable_local(self, slot: Slot) -> Dr7 {
        Dr7(self.0 | (1 << slot.enable_shift()))
    }

    /// Sets Gn, the enable the kernel uses (`DR_GLOBAL_ENABLE`).
    #[must_use]
    pub const fn enable_global(self, slot: Slot) -> Dr7 {
        Dr7(self.0 | (2 << slot.enable_shift()))
    }

    /// Clears Ln and Gn, keeping the fields.
    #[must_use]
    pub const fn disable(self, slot: Slot) -> Dr7 {
        Dr7(self.0 & !(3 << slot.enable_shift()))
    }

    /// Clears the slot entirely (Ln, Gn and fields), like the kernel's
    /// `arch_uninstall_hw_breakpoint`; GE/LE stay as they are, as in the kernel.
    #[must_use]
    pub const fn clear(self, slot: Slot) -> Dr7 {
        Dr7(self.0 & !(3 << slot.enable_shift()) & !(0xF << slot.field_shift()))
    }

    /// Whether Ln is set.
    #[must_use]
    pub const fn is_local_enabled(self, slot: Slot) -> bool {
        self.0 & (1 << slot.enable_shift()) != 0
    }

    /// Whether Gn is set.
    #[must_use]
    pub const fn is_global_enabled(self, slot: Slot) -> bool {
        self.0 & (2 << slot.enable_shift()) != 0
    }

    /// Whether Ln or Gn is set, i.e. the CPU watches this slot.
    #[must_use]
    pub const fn is_enabled(self, slot: Slot) -> bool {
        self.0 & (3 << slot.enable_shift()) != 0
    }

    /// Slots with Ln or Gn set.
    #[must_use]
    pub const fn enabled_slots(self) -> SlotSet {
        let mut set = SlotSet::EMPTY;
        let mut i = 0;
        while i < 4 {
            if self.is_enabled(Slot(i)) {
                set = set.with(Slot(i));
            }
            i += 1;
        }
        set
    }

    /// The slot's R/W field, whether or not it is enabled.
    #[must_use]
    pub const fn condition(self, slot: Slot) -> Condition {
        match (self.0 >> slot.field_shift()) & 0b11 {
            0b00 => Condition::Execute,
            0b01 => Condition::Write,
            // 0b11; 0b10 cannot occur: `from_bits` rejects it and `set` never writes it.
            _ => Condition::ReadWrite,
        }
    }

    /// The slot's LEN field, whether or not it is enabled.
    #[must_use]
    pub const fn length(self, slot: Slot) -> Length {
        match (self.0 >> (slot.field_shift() + 2)) & 0b11 {
            0b00 => Length::One,
            0b01 => Length::Two,
            0b11 => Length::Four,
            _ => Length::Eight,
        }
    }

    /// The slot's configuration, or `None` when neither Ln nor Gn is set.
    #[must_use]
    pub const fn get(self, slot: Slot) -> Option<SlotState> {
        if !self.is_enabled(slot) {
            return None;
        }
        Some(SlotState {
            condition: self.condition(slot),
            length: self.length(slot),
            local: self.is_local_enabled(slot),
            global: self.is_global_enabled(slot),
        })
    }

    /// Whether LE is set.
    #[must_use]
    pub const fn local_exact(self) -> bool {
        self.0 & Dr7::LOCAL_EXACT != 0
    }

    /// Whether GE is set.
    #[must_use]
    pub const fn global_exact(self) -> bool {
        self.0 & Dr7::GLOBAL_EXACT != 0
    }

    /// Sets or clears LE.
    #[must_use]
    pub const fn set_local_exact(self, on: bool) -> Dr7 {
        self.with_bit(Dr7::LOCAL_EXACT, on)
    }

    /// Sets or clears GE.
    #[must_use]
    pub const fn set_global_exact(self, on: bool) -> Dr7 {
        self.with_bit(Dr7::GLOBAL_EXACT, on)
    }

    /// Whether GD is set.
    #[must_use]
    pub const fn general_detect(self) -> bool {
        self.0 & Dr7::GENERAL_DETECT != 0
    }

    /// Whether the RTM bit is set.
    #[must_use]
    pub const fn rtm(self) -> bool {
        self.0 & Dr7::RTM != 0
    }

    /// Whether bit 10 is set (as the CPU reports it).
    #[must_use]
    pub const fn fixed_bit(self) -> bool {
        self.0 & Dr7::FIXED_1 != 0
    }

    /// Sets or clears bit 10, e.g. to compare a kernel `cpu_dr7` with a CPU read.
    #[must_use]
    pub const fn set_fixed_bit(self, on: bool) -> Dr7 {
        self.with_bit(Dr7::FIXED_1, on)
    }

    const fn with_bit(self, bit: u64, on: bool) -> Dr7 {
        if on {
            Dr7(self.0 | bit)
        } else {
            Dr7(self.0 & !bit)
        }
    }
}

/// DR6, the debug status register, held in *positive polarity*: a set bit means the condition
/// happened, as the kernel passes it to `DIE_DEBUG` notifiers and FRED reports it.
///
/// On the CPU, the reserved bits of DR6 read as 1 and BLD (bit 11) and RTM (bit 16) are active
/// low, so the idle value is 0xFFFF0FF0 (`DR6_RESERVED`). The kernel's `debug_read_reset_dr6`
/// (`arch/x86/kernel/traps.c`) XORs the raw value with `DR6_RESERVED` to get positive polarity
/// and writes `DR6_RESERVED` back at once, because the CPU never clears B0..B3 itself.
/// [`Dr6::from_raw`] does the same XOR; [`Dr6::RESET_RAW`] is the value to write back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dr6(u64);

impl Dr6 {
    /// `DR6_RESERVED`: the reset value and the polarity mask (reserved bits and the active-low
    /// BLD and RTM bits).
    pub const RESET_RAW: u64 = 0xFFFF_0FF0;
    /// B0..B3: breakpoint conditions met (`DR_TRAP_BITS`).
    pub const TRAP_BITS: u64 = 0xF;
    /// BLD: bus-lock detected (`DR_BUS_LOCK`; active low on the CPU).
    pub const BUS_LOCK: u64 = 1 << 11;
    /// BD: the next instruction accesses a debug register while DR7.GD is set.
    pub const BD: u64 = 1 << 13;
    /// BS: single step (`DR_STEP`).
    pub const BS: u64 = 1 << 14;
    /// BT: task switch to a TSS with the T flag (`DR_SWITCH`).
    pub const BT: u64 = 1 << 15;
    /// RTM: the #DB hit inside an RTM transaction (active low on the CPU).
    pub const RTM: u64 = 1 << 16;
    /// Every bit with a meaning (KVM's `DR6_VOLATILE`, 0x0001E80F).
    pub const DEFINED: u64 =
        Dr6::TRAP_BITS | Dr6::BUS_LOCK | Dr6::BD | Dr6::BS | Dr6::BT | Dr6::RTM;

    /// Nothing happened.
    pub const EMPTY: Dr6 = Dr6(0);

    /// From a value read from the CPU's DR6 (flips to positive polarity, like
    /// `debug_read_reset_dr6`). Reserved bits that read as 1, as they should, become 0.
    #[must_use]
    pub const fn from_raw(raw: u64) -> Dr6 {
        Dr6(raw ^ Dr6::RESET_RAW)
    }

    /// From a positive-polarity value, e.g. the `dr6` the kernel hands to `DIE_DEBUG`
    /// notifiers (`*(unsigned long *)args->err`) or a thread's `virtual_dr6`.
    #[must_use]
    pub const fn from_bits(bits: u64) -> Dr6 {
        Dr6(bits)
    }

    /// The positive-polarity value.
    #[must_use]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Back to the CPU's polarity (what a read of DR6 would have returned).
    #[must_use]
    pub const fn to_raw(self) -> u64 {
        self.0 ^ Dr6::RESET_RAW
    }

    /// B0..B3: slots whose condition was met. The SDM allows these to be set for slots that
    /// are not enabled in DR7, so see also [`Dr6::triggered_enabled`].
    #[must_use]
    pub const fn triggered_slots(self) -> SlotSet {
        SlotSet::from_mask((self.0 & Dr6::TRAP_BITS) as u8)
    }

    /// Whether Bn is set for `slot`.
    #[must_use]
    pub const fn triggered(self, slot: Slot) -> bool {
        self.triggered_slots().contains(slot)
    }

    /// B0..B3 restricted to the slots enabled in `dr7`: the breakpoints that actually caused
    /// the exception.
    #[must_use]
    pub const fn triggered_enabled(self, dr7: Dr7) -> SlotSet {
        SlotSet(self.triggered_slots().0 & dr7.enabled_slots().0)
    }

    /// BD: debug-register access detected.
    #[must_use]
    pub const fn bd(self) -> bool {
        self.0 & Dr6::BD != 0
    }

    /// BS: single step.
    #[must_use]
    pub const fn bs(self) -> bool {
        self.0 & Dr6::BS != 0
    }

    /// BT: task switch.
    #[must_use]
    pub const fn bt(self) -> bool {
        self.0 & Dr6::BT != 0
    }

    /// RTM: the exception happened inside a transaction (the CPU cleared bit 16).
    #[must_use]
    pub const fn rtm(self) -> bool {
        self.0 & Dr6::RTM != 0
    }

    /// BLD: bus lock detected (the CPU cleared bit 11).
    #[must_use]
    pub const fn bus_lock(self) -> bool {
        self.0 & Dr6::BUS_LOCK != 0
    }

    /// Bits outside [`Dr6::DEFINED`]: nonzero only if a reserved bit read differently from
    /// its documented value.
    #[must_use]
    pub const fn unknown_bits(self) -> u64 {
        self.0 & !Dr6::DEFINED
    }
}

/// Splits the byte range `[address, address + len)` into the fewest aligned watches.
///
/// Pass the absolute linear address (object base plus field offset), because alignment is a
/// property of the address. Data conditions use the greedy choice of the largest length in
/// 8/4/2/1 that is both aligned at the cursor and fits in what remains, which is minimal among
/// splits into aligned power-of-two chunks; e.g. 6 bytes at 2 become `[2, 2 bytes]`,
/// `[4, 4 bytes]`. [`Condition::Execute`] yields one one-byte watch per byte, since execute
/// watches are one byte long. The result may need more than four slots; check `len()`.
///
/// # Errors
/// [`Error::RangeOverflow`] if the range goes past 2^64 (ending exactly at 2^64 is fine).
pub const fn split_range(address: u64, len: u64, condition: Condition) -> Result<Split, Error> {
    if len != 0 && address.checked_add(len - 1).is_none() {
        return Err(Error::RangeOverflow { address, len });
    }
    Ok(Split {
        cursor: address,
        remaining: len,
        condition,
    })
}

/// Iterator returned by [`split_range`], ascending by address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    cursor: u64,
    remaining: u64,
    condition: Condition,
}

impl Split {
    /// The next watch, as a `const fn` (the `Iterator` impl calls this).
    #[must_use]
    pub const fn next_watch(&mut self) -> Option<Watch> {
        if self.remaining == 0 {
            return None;
        }
        let length = chunk_length(self.cursor, self.remaining, self.condition);
        let watch = Watch {
            address: self.cursor,
            length,
            condition: self.condition,
        };
        // The last chunk may end exactly at 2^64; the cursor is unused after it.
        self.cursor = self.cursor.wrapping_add(length.bytes());
        self.remaining -= length.bytes();
        Some(watch)
    }

    /// How many watches are left, computed without iterating.
    #[must_use]
    pub const fn count_remaining(&self) -> u64 {
        if matches!(self.condition, Condition::Execute) {
            return self.remaining;
        }
        let mut cursor = self.cursor;
        let mut remaining = self.remaining;
        let mut count = 0;
        // At most three chunks (1, 2, 4) before the cursor is 8-aligned.
        while remaining != 0 && cursor.trailing_zeros() < 3 {
            let bytes = chunk_length(cursor, remaining, self.condition).bytes();
            cursor = cursor.wrapping_add(bytes);
            remaining -= bytes;
            count += 1;
        }
        // From an 8-aligned cursor: whole 8s, then 4, 2, 1 for the set bits of the rest.
        count + remaining / 8 + (remaining % 8).count_ones() as u64
    }
}

/// Largest aligned length at `cursor` not exceeding `remaining` (which is nonzero).
const fn chunk_length(cursor: u64, remaining: u64, condition: Condition) -> Length {
    if matches!(condition, Condition::Execute) {
        return Length::One;
    }
    // Power of two the cursor is a multiple of (64 for address 0).
    let align = cursor.trailing_zeros();
    if align >= 3 && remaining >= 8 {
        Length::Eight
    } else if align >= 2 && remaining >= 4 {
        Length::Four
    } else if align >= 1 && remaining >= 2 {
        Length::Two
    } else {
        Length::One
    }
}

impl Iterator for Split {
    type Item = Watch;

    fn next(&mut self) -> Option<Watch> {
        self.next_watch()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match usize::try_from(self.count_remaining()) {
            Ok(n) => (n, Some(n)),
            Err(_) => (usize::MAX, None),
        }
    }
}

// Exact where `usize` holds any `u64` count, i.e. on x86-64.
#[cfg(target_pointer_width = "64")]
impl ExactSizeIterator for Split {}
impl core::iter::FusedIterator for Split {}
