//! `MaxCnt` arithmetic: the sampling period in `IbsOpCtl` and back.
//!
//! The hardware counts in units of 16: `opmaxcnt` holds period bits 4-19 and, with
//! `IBS_CAPS_OPCNTEXT`, `opmaxcnt_ext` holds period bits 20-26 (it sits at register bits
//! 20-26, so the kernel copies those bits across unshifted). Hence
//! `period = ((opmaxcnt_ext << 16) | opmaxcnt) << 4`, as `perf_ibs_init` and
//! `perf_ibs_start` compute it. The smallest period is 0x10 (`perf_ibs_set_period`'s `min`),
//! the largest `IBS_OP_MAX_CNT << 4` = 0xFFFF0, or 0x7FFFFF0 (2^27 - 16) with `OPCNTEXT`.

use core::fmt;

use crate::caps::Caps;
use crate::registers::{find_field, FieldSpec, IbsOpCtl};

const OPMAXCNT: FieldSpec = find_field(IbsOpCtl::FIELDS, "opmaxcnt");
const OPMAXCNT_EXT: FieldSpec = find_field(IbsOpCtl::FIELDS, "opmaxcnt_ext");

/// The smallest period the kernel programs.
pub const MIN_PERIOD: u64 = 0x10;
/// The largest period without `IBS_CAPS_OPCNTEXT`.
pub const MAX_PERIOD: u64 = 0xF_FFF0;
/// The largest period with `IBS_CAPS_OPCNTEXT`.
pub const MAX_PERIOD_EXT: u64 = 0x7FF_FFF0;

/// What the op counter counts, chosen by `cnt_ctl` (perf's `cnt_ctl` format attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CountUnit {
    /// `cnt_ctl` = 0: core clock cycles.
    Cycles,
    /// `cnt_ctl` = 1: dispatched ops.
    DispatchedOps,
}

/// Why a period cannot be programmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeriodError {
    /// The low 4 bits are set; the kernel refuses such a period (`perf_ibs_init`).
    NotMultipleOf16 { period: u64 },
    /// Below 0x10.
    TooSmall { period: u64 },
    /// Above the largest period for the counter width.
    TooLarge { period: u64, max: u64 },
}

impl fmt::Display for PeriodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PeriodError::NotMultipleOf16 { period } => {
                write!(f, "IBS op period {period:#x} is not a multiple of 16")
            }
            PeriodError::TooSmall { period } => write!(
                f,
                "IBS op period {period:#x} is below the minimum {MIN_PERIOD:#x}"
            ),
            PeriodError::TooLarge { period, max } => {
                write!(f, "IBS op period {period:#x} is above the maximum {max:#x}")
            }
        }
    }
}

impl core::error::Error for PeriodError {}

/// The answer for a range check that cannot fail once the bounds above hold; an error
/// rather than a panic so that a mistake here cannot take a caller down.
const fn unreachable_error(period: u64, max: u64) -> Result<IbsOpCtl, PeriodError> {
    Err(PeriodError::TooLarge { period, max })
}

/// The largest period for a CPU with or without `IBS_CAPS_OPCNTEXT`.
#[must_use]
pub const fn max_period(opcntext: bool) -> u64 {
    if opcntext {
        MAX_PERIOD_EXT
    } else {
        MAX_PERIOD
    }
}

/// An `IbsOpCtl` with only the max-count fields set, programmed for `period`.
///
/// # Errors
/// [`PeriodError`] when `period` is not a multiple of 16 or outside
/// `0x10..=max_period(opcntext)`.
pub const fn encode_period(period: u64, opcntext: bool) -> Result<IbsOpCtl, PeriodError> {
    IbsOpCtl(0).with_period(period, opcntext)
}

impl IbsOpCtl {
    /// The sampling period programmed in `opmaxcnt` and, when `opcntext`, `opmaxcnt_ext`
    /// (without the capability those bits are reserved and the kernel ignores them).
    #[must_use]
    pub const fn period(self, opcntext: bool) -> u64 {
        let ext = if opcntext {
            self.opmaxcnt_ext() as u64
        } else {
            0
        };
        ((ext << 16) | self.opmaxcnt() as u64) << 4
    }

    /// This register with its max-count fields replaced to program `period`; other bits
    /// are kept.
    ///
    /// # Errors
    /// As [`encode_period`].
    pub const fn with_period(self, period: u64, opcntext: bool) -> Result<IbsOpCtl, PeriodError> {
        if period & 0xf != 0 {
            return Err(PeriodError::NotMultipleOf16 { period });
        }
        if period < MIN_PERIOD {
            return Err(PeriodError::TooSmall { period });
        }
        let max = max_period(opcntext);
        if period > max {
            return Err(PeriodError::TooLarge { period, max });
        }
        let units = period >> 4;
        let Some(raw) = OPMAXCNT.insert(self.0, units & 0xffff) else {
            return unreachable_error(period, max);
        };
        match OPMAXCNT_EXT.insert(raw, units >> 16) {
            Some(raw) => Ok(IbsOpCtl(raw)),
            // `period <= max` keeps `units >> 16` within the 7 bits.
            None => unreachable_error(period, max),
        }
    }

    /// What the counter counts.
    #[must_use]
    pub const fn count_unit(self) -> CountUnit {
        if self.cnt_ctl() {
            CountUnit::DispatchedOps
        } else {
            CountUnit::Cycles
        }
    }

    /// The count the kernel credits to the event for this register value
    /// (`get_ibs_op_count`): the whole period when the sample is valid, otherwise the
    /// current count if the CPU can read it (`IBS_CAPS_RDWROPCNT`).
    #[must_use]
    pub const fn count(self, caps: Caps) -> Option<u64> {
        if self.op_val() {
            Some(self.period(caps.contains(Caps::OPCNTEXT)))
        } else if caps.contains(Caps::RDWROPCNT) {
            Some(self.opcurcnt() as u64)
        } else {
            None
        }
    }
}
