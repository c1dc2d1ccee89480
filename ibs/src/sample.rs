//! The raw blob perf records for an `ibs_op` sample with `PERF_SAMPLE_RAW`.
//!
//! `perf_ibs_handle_irq` (Linux 6.12 `arch/x86/events/amd/ibs.c`) fills a
//! `struct perf_ibs_data { u32 size; u32 caps; u64 regs[]; }` and hands perf the bytes from
//! `caps` on: the caps word, then `IbsOpCtl` and the six MSRs after it in MSR order (with
//! `PERF_SAMPLE_RAW` the loop always reads all of them), then `IbsBrTarget` when caps has
//! `IBS_CAPS_BRNTRGT` and `IbsOpData4` when it has `IBS_CAPS_OPDATA4`. All little-endian.
//! The record's u32 size + these 4 + 8n bytes is already a multiple of 8, so perf adds no
//! padding and the blob's length is fixed by its caps.

use core::fmt;

use crate::caps::Caps;
use crate::registers::{
    IbsBrTarget, IbsDcLinAd, IbsDcPhysAd, IbsOpCtl, IbsOpData, IbsOpData2, IbsOpData3, IbsOpData4,
    IbsOpRip,
};

/// Bytes of the caps word in front of the registers.
const CAPS_LEN: usize = 4;
/// Registers every `ibs_op` raw sample has: `IbsOpCtl` through `IbsDcPhysAd`.
const FIXED_REGISTERS: usize = 7;

/// A decoded `ibs_op` sample: the registers exactly as read, no validity applied. The gated
/// accessors ([`IbsOpSample::rip`], [`IbsOpSample::linear_address`], ...) apply the valid
/// bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IbsOpSample {
    pub caps: Caps,
    pub op_ctl: IbsOpCtl,
    pub op_rip: IbsOpRip,
    pub op_data: IbsOpData,
    pub op_data2: IbsOpData2,
    pub op_data3: IbsOpData3,
    pub dc_lin_ad: IbsDcLinAd,
    pub dc_phys_ad: IbsDcPhysAd,
    /// Present exactly when `caps` has [`Caps::BRNTRGT`].
    pub br_target: Option<IbsBrTarget>,
    /// Present exactly when `caps` has [`Caps::OPDATA4`].
    pub op_data4: Option<IbsOpData4>,
}

/// Why bytes are not an `ibs_op` raw sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than the 4 bytes of the caps word.
    NoCaps { len: usize },
    /// The length is not the one the caps word implies.
    Length {
        len: usize,
        expected: usize,
        caps: Caps,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::NoCaps { len } => write!(
                f,
                "an IBS op raw sample starts with a 4-byte caps word, but there are only {len} bytes"
            ),
            DecodeError::Length {
                len,
                expected,
                caps,
            } => write!(
                f,
                "an IBS op raw sample with caps {caps} is {expected} bytes \
                 (caps + {} registers of 8), not {len}",
                (expected - CAPS_LEN) / 8
            ),
        }
    }
}

impl core::error::Error for DecodeError {}

/// The largest blob: caps, seven registers, `IbsBrTarget` and `IbsOpData4`.
pub const MAX_RAW_LEN: usize = CAPS_LEN + 8 * (FIXED_REGISTERS + 2);

/// A sample encoded the way perf delivers it; see [`IbsOpSample::to_raw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawBlob {
    bytes: [u8; MAX_RAW_LEN],
    len: usize,
}

impl RawBlob {
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl IbsOpSample {
    /// The blob length perf produces for `caps`: 60, 68 or 76 bytes.
    #[must_use]
    pub const fn raw_len(caps: Caps) -> usize {
        let mut registers = FIXED_REGISTERS;
        if caps.contains(Caps::BRNTRGT) {
            registers += 1;
        }
        if caps.contains(Caps::OPDATA4) {
            registers += 1;
        }
        CAPS_LEN + 8 * registers
    }

    /// Decodes a raw blob; its length must be exactly what its caps word implies.
    ///
    /// # Errors
    /// [`DecodeError`] when the blob is shorter than the caps word or its length disagrees
    /// with the caps.
    pub fn decode(raw: &[u8]) -> Result<Self, DecodeError> {
        let Some((caps_bytes, mut rest)) = raw.split_first_chunk::<CAPS_LEN>() else {
            return Err(DecodeError::NoCaps { len: raw.len() });
        };
        let caps = Caps(u32::from_le_bytes(*caps_bytes));
        let expected = Self::raw_len(caps);
        if raw.len() != expected {
            return Err(DecodeError::Length {
                len: raw.len(),
                expected,
                caps,
            });
        }
        let mut next = || {
            let (word, tail) = rest
                .split_first_chunk::<8>()
                .map_or(([0; 8], &[][..]), |(w, t)| (*w, t));
            rest = tail;
            u64::from_le_bytes(word)
        };
        let mut sample = IbsOpSample {
            caps,
            op_ctl: IbsOpCtl(next()),
            op_rip: IbsOpRip(next()),
            op_data: IbsOpData(next()),
            op_data2: IbsOpData2(next()),
            op_data3: IbsOpData3(next()),
            dc_lin_ad: IbsDcLinAd(next()),
            dc_phys_ad: IbsDcPhysAd(next()),
            br_target: None,
            op_data4: None,
        };
        if caps.contains(Caps::BRNTRGT) {
            sample.br_target = Some(IbsBrTarget(next()));
        }
        if caps.contains(Caps::OPDATA4) {
            sample.op_data4 = Some(IbsOpData4(next()));
        }
        Ok(sample)
    }

    /// The blob perf would deliver for this sample. `caps` decides which optional registers
    /// are written; one the caps name but the sample lacks is written as zero.
    #[must_use]
    pub fn to_raw(&self) -> RawBlob {
        let mut blob = RawBlob {
            bytes: [0; MAX_RAW_LEN],
            len: 0,
        };
        let mut put = |bytes: &[u8]| {
            blob.bytes[blob.len..blob.len + bytes.len()].copy_from_slice(bytes);
            blob.len += bytes.len();
        };
        put(&self.caps.0.to_le_bytes());
        for word in [
            self.op_ctl.0,
            self.op_rip.0,
            self.op_data.0,
            self.op_data2.0,
            self.op_data3.0,
            self.dc_lin_ad.0,
            self.dc_phys_ad.0,
        ] {
            put(&word.to_le_bytes());
        }
        if self.caps.contains(Caps::BRNTRGT) {
            put(&self.br_target.unwrap_or_default().0.to_le_bytes());
        }
        if self.caps.contains(Caps::OPDATA4) {
            put(&self.op_data4.unwrap_or_default().0.to_le_bytes());
        }
        blob
    }

    /// Whether the registers hold a sample (`op_val`). perf drops samples without it, so a
    /// recorded blob normally has it; every gated accessor below requires it.
    #[must_use]
    pub const fn is_valid(&self) -> bool {
        self.op_ctl.op_val()
    }

    /// The sampled op's instruction address, unless `op_rip_invalid` says it is not one.
    #[must_use]
    pub const fn rip(&self) -> Option<u64> {
        if self.is_valid() && !self.op_data.op_rip_invalid() {
            Some(self.op_rip.0)
        } else {
            None
        }
    }

    /// The data linear address, when `dc_lin_addr_valid`.
    #[must_use]
    pub const fn linear_address(&self) -> Option<u64> {
        if self.is_valid() && self.op_data3.dc_lin_addr_valid() {
            Some(self.dc_lin_ad.0)
        } else {
            None
        }
    }

    /// The data physical address, when `dc_phy_addr_valid`.
    #[must_use]
    pub const fn physical_address(&self) -> Option<u64> {
        if self.is_valid() && self.op_data3.dc_phy_addr_valid() {
            Some(self.dc_phys_ad.0)
        } else {
            None
        }
    }

    /// The branch target, when the blob has one, the op is a retired branch
    /// (`op_brn_ret`) and the target is not zero: perf's own dump
    /// (`tools/perf/util/amd-sample-raw.c`) applies the same test.
    #[must_use]
    pub const fn branch_target(&self) -> Option<u64> {
        match self.br_target {
            Some(IbsBrTarget(target))
                if self.is_valid() && self.op_data.op_brn_ret() && target != 0 =>
            {
                Some(target)
            }
            _ => None,
        }
    }
}
