//! AMD Instruction-Based Sampling (IBS) op register decoding for dprof.
//!
//! The bit layouts, register order and data-source tables follow Linux 6.12:
//! `arch/x86/include/asm/amd-ibs.h` (the register unions and `IBS_DATA_SRC_*` codes),
//! `arch/x86/include/asm/perf_event.h` (`IBS_CAPS_*`, the op control masks) and
//! `arch/x86/events/amd/ibs.c` (how perf builds the `PERF_SAMPLE_RAW` blob, turns `DataSrc`
//! into a memory level, and converts periods to `MaxCnt`).
//!
//! - [`registers`]: one typed newtype per register, whose accessors are named after the
//!   header's bitfields and read their position from the same [`FieldSpec`] table that
//!   [`Register::fields`] exposes, so a test can hold the table against the header.
//! - [`IbsOpSample::decode`]: the raw blob perf delivers for the `ibs_op` PMU.
//! - [`interpret`]: data source, memory level, cache-hit state, TLB and latencies, gated the
//!   way the kernel gates them.
//! - [`period`]: `MaxCnt` arithmetic in both directions.
//!
//! ```
//! use dprof_ibs::{DataSource, IbsOpSample, MemLevel, Platform};
//!
//! // caps 0x5f, then IbsOpCtl (op_en | op_val | MaxCnt 0x10), IbsOpRip, IbsOpData,
//! // IbsOpData2 (DataSrc 3 = DRAM, RmtNode), IbsOpData3 (load, DC miss, L2 miss),
//! // IbsDcLinAd, IbsDcPhysAd.
//! let mut blob = vec![0x5f, 0, 0, 0];
//! for reg in [0x6_0010u64, 0xffff_ffff_8100_0abc, 0, 0x13, 0x10_0081, 0, 0] {
//!     blob.extend(reg.to_le_bytes());
//! }
//! let sample = IbsOpSample::decode(&blob)?;
//! let platform = Platform::from_caps(sample.caps);
//! assert_eq!(
//!     sample.mem_level(platform),
//!     MemLevel::Source(DataSource::Dram { remote: true })
//! );
//! assert_eq!(sample.rip(), Some(0xffff_ffff_8100_0abc));
//! assert_eq!(sample.linear_address(), None);
//! assert_eq!(sample.op_ctl.period(true), 0x100);
//! # Ok::<(), dprof_ibs::DecodeError>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]

pub mod caps;
pub mod interpret;
pub mod period;
pub mod registers;
pub mod sample;

pub use caps::Caps;
pub use interpret::{
    CacheHitState, CpuModel, DataSource, DataSrcEncoding, Interpretation, MemLevel, MemOp,
    PageSize, Platform, TlbOutcome,
};
pub use period::{encode_period, CountUnit, PeriodError};
pub use registers::{
    FieldSpec, IbsBrTarget, IbsDcLinAd, IbsDcPhysAd, IbsFetchCtl, IbsOpCtl, IbsOpData, IbsOpData2,
    IbsOpData3, IbsOpData4, IbsOpRip, IcIbsExtdCtl, Register,
};
pub use sample::{DecodeError, IbsOpSample, RawBlob};
