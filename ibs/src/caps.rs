//! The IBS capability word (`IBS_CAPS_*` in Linux's `asm/perf_event.h`).
//!
//! It is CPUID `Fn8000_001B` EAX with bit 0 meaning "IBS present", and perf puts it in front of
//! every raw IBS sample, so the decoder knows which optional registers follow and which
//! data-source table applies.

use core::fmt;

/// The IBS capability bits perf reports with each raw sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Caps(pub u32);

impl Caps {
    pub const AVAIL: Caps = Caps(1 << 0);
    pub const FETCHSAM: Caps = Caps(1 << 1);
    pub const OPSAM: Caps = Caps(1 << 2);
    pub const RDWROPCNT: Caps = Caps(1 << 3);
    pub const OPCNT: Caps = Caps(1 << 4);
    /// `IbsBrTarget` follows `IbsDcPhysAd` in raw samples.
    pub const BRNTRGT: Caps = Caps(1 << 5);
    /// `IbsOpCtl` has `opmaxcnt_ext`: periods up to 2^27 - 16.
    pub const OPCNTEXT: Caps = Caps(1 << 6);
    pub const RIPINVALIDCHK: Caps = Caps(1 << 7);
    pub const OPBRNFUSE: Caps = Caps(1 << 8);
    pub const FETCHCTLEXTD: Caps = Caps(1 << 9);
    /// `IbsOpData4` follows (after `IbsBrTarget` when present) in raw samples.
    pub const OPDATA4: Caps = Caps(1 << 10);
    /// Zen4 extensions, among them the 5-bit data source (`data_src_hi`).
    pub const ZEN4: Caps = Caps(1 << 11);

    /// Every named bit with its name (the suffix of `IBS_CAPS_*`), in bit order.
    pub const NAMED: [(&'static str, Caps); 12] = [
        ("AVAIL", Caps::AVAIL),
        ("FETCHSAM", Caps::FETCHSAM),
        ("OPSAM", Caps::OPSAM),
        ("RDWROPCNT", Caps::RDWROPCNT),
        ("OPCNT", Caps::OPCNT),
        ("BRNTRGT", Caps::BRNTRGT),
        ("OPCNTEXT", Caps::OPCNTEXT),
        ("RIPINVALIDCHK", Caps::RIPINVALIDCHK),
        ("OPBRNFUSE", Caps::OPBRNFUSE),
        ("FETCHCTLEXTD", Caps::FETCHCTLEXTD),
        ("OPDATA4", Caps::OPDATA4),
        ("ZEN4", Caps::ZEN4),
    ];

    /// Whether every bit of `other` is set.
    #[must_use]
    pub const fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// The set bits that have no name here.
    #[must_use]
    pub const fn unknown_bits(self) -> u32 {
        self.0 & !0xfff
    }

    /// The names of the set bits, in bit order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Caps::NAMED
            .into_iter()
            .filter(move |&(_, bit)| self.contains(bit))
            .map(|(name, _)| name)
    }
}

impl core::ops::BitOr for Caps {
    type Output = Caps;

    fn bitor(self, rhs: Caps) -> Caps {
        Caps(self.0 | rhs.0)
    }
}

/// `0x... NAME|NAME`, the way a person compares it with `IBS_CAPS_*`.
impl fmt::Display for Caps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)?;
        let mut sep = " ";
        for name in self.names() {
            write!(f, "{sep}{name}")?;
            sep = "|";
        }
        Ok(())
    }
}
