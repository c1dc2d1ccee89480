//! What a hardware memory sampler (AMD IBS op, Intel PEBS load latency) says about one sampled
//! access: its data address, whether it missed the L1 data cache, which level or agent served
//! it, its latency, and whether another core held the line modified (HITM).
//!
//! IBS samples are read from their raw registers with the `dprof-ibs` decoder; PEBS samples
//! (and IBS samples the kernel gave no registers for) from the generic fields perf filled in,
//! above all [`DataSrc`], perf's `perf_mem_data_src`. Both end in one vocabulary,
//! [`MemSource`], so the data profile adds them up the same way.
//!
//! What counts as a miss: IBS's `dc_miss` (the load or store missed the L1 data cache; a hit
//! on an outstanding miss counts, as the hardware says); for PEBS, a source past L1 (the
//! line fill buffer included, which is the same thing seen from Intel's side).

use dprof_abi::{
    AccessSample, HW_DATA_ADDR, HW_DATA_SRC, HW_LATENCY, SAMPLER_KIND_IBS, SAMPLER_KIND_PEBS,
};
use dprof_ibs::{CacheHitState, CpuModel, DataSource, IbsOpSample, MemLevel, MemOp, Platform};

use dprof_model::{AccessKind, MemSource};

#[cfg(test)]
mod tests;

/// The report's source of the IBS decoder's memory level.
#[must_use]
pub const fn mem_source_of_ibs(level: MemLevel) -> MemSource {
    match level {
        MemLevel::L1 => MemSource::L1,
        MemLevel::L2 => MemSource::L2,
        MemLevel::MissBuffer => MemSource::FillBuffer,
        MemLevel::Uncached => MemSource::Uncached,
        MemLevel::NotAvailable => MemSource::Unknown,
        MemLevel::Source(source) => match source {
            DataSource::LocalCcxCache => MemSource::L3,
            DataSource::NearCcxCache => MemSource::NearCache,
            DataSource::FarCache => MemSource::RemoteCache,
            DataSource::Dram { remote: false } => MemSource::Dram,
            DataSource::Dram { remote: true } => MemSource::RemoteDram,
            DataSource::Pmem { .. } | DataSource::ExtensionMemory { .. } => MemSource::OtherMemory,
            DataSource::Io => MemSource::Io,
            DataSource::NoStatus | DataSource::PeerAgentMemory | DataSource::Reserved(_) => {
                MemSource::Unknown
            }
        },
    }
}

/// The `perf_mem_data_src` fields and values, from Linux 6.12's
/// `include/uapi/linux/perf_event.h` (little-endian bitfield layout).
pub mod perf {
    /// `mem_op` (bits 0-4): load.
    pub const MEM_OP_LOAD: u64 = 0x02;
    /// `mem_op`: store.
    pub const MEM_OP_STORE: u64 = 0x04;
    /// `mem_op`: prefetch.
    pub const MEM_OP_PFETCH: u64 = 0x08;
    /// Shift of `mem_op`.
    pub const MEM_OP_SHIFT: u32 = 0;
    /// `mem_lvl` (bits 5-18): not available.
    pub const MEM_LVL_NA: u64 = 0x01;
    /// `mem_lvl`: hit at the level named.
    pub const MEM_LVL_HIT: u64 = 0x02;
    /// `mem_lvl`: miss at the level named.
    pub const MEM_LVL_MISS: u64 = 0x04;
    /// `mem_lvl`: L1.
    pub const MEM_LVL_L1: u64 = 0x08;
    /// `mem_lvl`: line fill buffer.
    pub const MEM_LVL_LFB: u64 = 0x10;
    /// `mem_lvl`: L2.
    pub const MEM_LVL_L2: u64 = 0x20;
    /// `mem_lvl`: L3.
    pub const MEM_LVL_L3: u64 = 0x40;
    /// `mem_lvl`: local DRAM.
    pub const MEM_LVL_LOC_RAM: u64 = 0x80;
    /// `mem_lvl`: remote DRAM, 1 hop.
    pub const MEM_LVL_REM_RAM1: u64 = 0x100;
    /// `mem_lvl`: remote DRAM, 2 hops.
    pub const MEM_LVL_REM_RAM2: u64 = 0x200;
    /// `mem_lvl`: remote cache, 1 hop.
    pub const MEM_LVL_REM_CCE1: u64 = 0x400;
    /// `mem_lvl`: remote cache, 2 hops.
    pub const MEM_LVL_REM_CCE2: u64 = 0x800;
    /// `mem_lvl`: I/O memory.
    pub const MEM_LVL_IO: u64 = 0x1000;
    /// `mem_lvl`: uncached memory.
    pub const MEM_LVL_UNC: u64 = 0x2000;
    /// Shift of `mem_lvl`.
    pub const MEM_LVL_SHIFT: u32 = 5;
    /// `mem_snoop` (bits 19-23): not available.
    pub const MEM_SNOOP_NA: u64 = 0x01;
    /// `mem_snoop`: no snoop.
    pub const MEM_SNOOP_NONE: u64 = 0x02;
    /// `mem_snoop`: snoop hit.
    pub const MEM_SNOOP_HIT: u64 = 0x04;
    /// `mem_snoop`: snoop miss.
    pub const MEM_SNOOP_MISS: u64 = 0x08;
    /// `mem_snoop`: snoop hit modified.
    pub const MEM_SNOOP_HITM: u64 = 0x10;
    /// Shift of `mem_snoop`.
    pub const MEM_SNOOP_SHIFT: u32 = 19;
    /// Shift of `mem_lock` (bits 24-25).
    pub const MEM_LOCK_SHIFT: u32 = 24;
    /// Shift of `mem_dtlb` (bits 26-32).
    pub const MEM_TLB_SHIFT: u32 = 26;
    /// `mem_lvl_num` (bits 33-36): L1.
    pub const MEM_LVLNUM_L1: u64 = 0x01;
    /// `mem_lvl_num`: L2.
    pub const MEM_LVLNUM_L2: u64 = 0x02;
    /// `mem_lvl_num`: L3.
    pub const MEM_LVLNUM_L3: u64 = 0x03;
    /// `mem_lvl_num`: L4.
    pub const MEM_LVLNUM_L4: u64 = 0x04;
    /// `mem_lvl_num`: L2 miss handling buffer.
    pub const MEM_LVLNUM_L2_MHB: u64 = 0x05;
    /// `mem_lvl_num`: memory-side cache.
    pub const MEM_LVLNUM_MSC: u64 = 0x06;
    /// `mem_lvl_num`: uncached.
    pub const MEM_LVLNUM_UNC: u64 = 0x08;
    /// `mem_lvl_num`: CXL.
    pub const MEM_LVLNUM_CXL: u64 = 0x09;
    /// `mem_lvl_num`: I/O.
    pub const MEM_LVLNUM_IO: u64 = 0x0a;
    /// `mem_lvl_num`: any cache.
    pub const MEM_LVLNUM_ANY_CACHE: u64 = 0x0b;
    /// `mem_lvl_num`: line fill buffer / L1 miss handling buffer.
    pub const MEM_LVLNUM_LFB: u64 = 0x0c;
    /// `mem_lvl_num`: RAM.
    pub const MEM_LVLNUM_RAM: u64 = 0x0d;
    /// `mem_lvl_num`: persistent memory.
    pub const MEM_LVLNUM_PMEM: u64 = 0x0e;
    /// `mem_lvl_num`: not available.
    pub const MEM_LVLNUM_NA: u64 = 0x0f;
    /// Shift of `mem_lvl_num`.
    pub const MEM_LVLNUM_SHIFT: u32 = 33;
    /// `mem_remote` (bit 37): remote.
    pub const MEM_REMOTE_REMOTE: u64 = 0x01;
    /// Shift of `mem_remote`.
    pub const MEM_REMOTE_SHIFT: u32 = 37;
    /// `mem_snoopx` (bits 38-39): forwarded from another core's cache, clean.
    pub const MEM_SNOOPX_FWD: u64 = 0x01;
    /// `mem_snoopx`: transferred from a peer cache.
    pub const MEM_SNOOPX_PEER: u64 = 0x02;
    /// Shift of `mem_snoopx`.
    pub const MEM_SNOOPX_SHIFT: u32 = 38;
    /// Shift of `mem_hops` (bits 43-45).
    pub const MEM_HOPS_SHIFT: u32 = 43;
}

/// perf's `union perf_mem_data_src`: where a sampled access's data came from, as the PMU
/// driver encoded it (Intel's PEBS data-source tables, AMD's IBS translation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSrc(pub u64);

impl DataSrc {
    const fn bits(self, shift: u32, width: u32) -> u64 {
        (self.0 >> shift) & ((1 << width) - 1)
    }

    /// `mem_op`: `perf::MEM_OP_*` bits.
    #[must_use]
    pub const fn mem_op(self) -> u64 {
        self.bits(perf::MEM_OP_SHIFT, 5)
    }

    /// `mem_lvl`: `perf::MEM_LVL_*` bits (the older, deprecated level encoding).
    #[must_use]
    pub const fn mem_lvl(self) -> u64 {
        self.bits(perf::MEM_LVL_SHIFT, 14)
    }

    /// `mem_snoop`: `perf::MEM_SNOOP_*` bits.
    #[must_use]
    pub const fn mem_snoop(self) -> u64 {
        self.bits(perf::MEM_SNOOP_SHIFT, 5)
    }

    /// `mem_lvl_num`: one `perf::MEM_LVLNUM_*` value, 0 when the driver left it out.
    #[must_use]
    pub const fn mem_lvl_num(self) -> u64 {
        self.bits(perf::MEM_LVLNUM_SHIFT, 4)
    }

    /// `mem_remote`: the level named is on another node.
    #[must_use]
    pub const fn mem_remote(self) -> bool {
        self.bits(perf::MEM_REMOTE_SHIFT, 1) == perf::MEM_REMOTE_REMOTE
    }

    /// `mem_snoopx`: `perf::MEM_SNOOPX_*` bits.
    #[must_use]
    pub const fn mem_snoopx(self) -> u64 {
        self.bits(perf::MEM_SNOOPX_SHIFT, 2)
    }

    /// `mem_hops`: 0 when not given, else 1 + hops (`PERF_MEM_HOPS_0` is 1).
    #[must_use]
    pub const fn mem_hops(self) -> u64 {
        self.bits(perf::MEM_HOPS_SHIFT, 3)
    }

    /// Load or store, when `mem_op` says.
    #[must_use]
    pub const fn kind(self) -> Option<AccessKind> {
        let op = self.mem_op();
        if op & perf::MEM_OP_LOAD != 0 {
            Some(AccessKind::Read)
        } else if op & perf::MEM_OP_STORE != 0 {
            Some(AccessKind::Write)
        } else {
            None
        }
    }

    /// Whether `mem_lvl` reports a miss (and no hit) at the level it names: the data came
    /// from somewhere past that level, but the driver does not say where.
    const fn missed_named_level(self) -> bool {
        let lvl = self.mem_lvl();
        lvl & perf::MEM_LVL_MISS != 0 && lvl & perf::MEM_LVL_HIT == 0
    }

    /// Where the data came from: `mem_lvl_num` (with `mem_remote`) when the driver set it,
    /// else the older `mem_lvl` bits.
    #[must_use]
    pub const fn source(self) -> MemSource {
        if self.missed_named_level() {
            return MemSource::Unknown;
        }
        let remote = self.mem_remote();
        match self.mem_lvl_num() {
            perf::MEM_LVLNUM_L1 => MemSource::L1,
            perf::MEM_LVLNUM_LFB | perf::MEM_LVLNUM_L2_MHB => MemSource::FillBuffer,
            perf::MEM_LVLNUM_L2 => MemSource::L2,
            // Sandy Bridge's table marks "L3 miss, remote DRAM shared" as remote L3 with
            // mem_lvl REM_RAM1.
            perf::MEM_LVLNUM_L3 if remote => {
                if self.mem_lvl() & (perf::MEM_LVL_REM_RAM1 | perf::MEM_LVL_REM_RAM2) != 0 {
                    MemSource::RemoteDram
                } else {
                    MemSource::RemoteCache
                }
            }
            perf::MEM_LVLNUM_L3 => MemSource::L3,
            perf::MEM_LVLNUM_ANY_CACHE if remote => MemSource::RemoteCache,
            perf::MEM_LVLNUM_ANY_CACHE => MemSource::NearCache,
            perf::MEM_LVLNUM_RAM if remote => MemSource::RemoteDram,
            perf::MEM_LVLNUM_RAM => MemSource::Dram,
            perf::MEM_LVLNUM_L4
            | perf::MEM_LVLNUM_MSC
            | perf::MEM_LVLNUM_PMEM
            | perf::MEM_LVLNUM_CXL => MemSource::OtherMemory,
            perf::MEM_LVLNUM_IO => MemSource::Io,
            perf::MEM_LVLNUM_UNC => MemSource::Uncached,
            _ => self.source_from_mem_lvl(),
        }
    }

    /// The source from `mem_lvl` alone (drivers that leave `mem_lvl_num` out or N/A).
    const fn source_from_mem_lvl(self) -> MemSource {
        let lvl = self.mem_lvl();
        if lvl & perf::MEM_LVL_L1 != 0 {
            MemSource::L1
        } else if lvl & perf::MEM_LVL_LFB != 0 {
            MemSource::FillBuffer
        } else if lvl & perf::MEM_LVL_L2 != 0 {
            MemSource::L2
        } else if lvl & perf::MEM_LVL_L3 != 0 {
            MemSource::L3
        } else if lvl & perf::MEM_LVL_LOC_RAM != 0 {
            MemSource::Dram
        } else if lvl & (perf::MEM_LVL_REM_RAM1 | perf::MEM_LVL_REM_RAM2) != 0 {
            MemSource::RemoteDram
        } else if lvl & (perf::MEM_LVL_REM_CCE1 | perf::MEM_LVL_REM_CCE2) != 0 {
            MemSource::RemoteCache
        } else if lvl & perf::MEM_LVL_IO != 0 {
            MemSource::Io
        } else if lvl & perf::MEM_LVL_UNC != 0 {
            MemSource::Uncached
        } else {
            MemSource::Unknown
        }
    }

    /// Whether the access missed the L1 data cache: any source past L1, or a miss reported
    /// at a named level; `None` when the value says nothing (N/A).
    #[must_use]
    pub const fn miss(self) -> Option<bool> {
        match self.source() {
            MemSource::L1 => Some(false),
            MemSource::Unknown if self.missed_named_level() => Some(true),
            MemSource::Unknown => None,
            _ => Some(true),
        }
    }

    /// Whether a snoop found the line modified in another core's cache (`mem_snoop` HITM).
    /// `mem_snoopx`'s forward and peer transfers are clean copies, not HITM.
    #[must_use]
    pub const fn hitm(self) -> bool {
        self.mem_snoop() & perf::MEM_SNOOP_HITM != 0
    }
}

/// What the hardware said about one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwAccess {
    /// Whether the sampled operation accessed memory at all (IBS tags every kind of op; an op
    /// that is neither a load nor a store has no data).
    pub memory_op: bool,
    /// The data's virtual address.
    pub addr: Option<u64>,
    /// Load or store, as the hardware saw it.
    pub kind: Option<AccessKind>,
    /// Bytes accessed, when the hardware says (IBS `op_mem_width`).
    pub size: Option<u32>,
    /// Whether the access missed the L1 data cache; `None` when the hardware does not say.
    pub miss: Option<bool>,
    /// Where the data came from.
    pub source: MemSource,
    /// The line was modified in another core's cache.
    pub hitm: bool,
    /// Cycles the access took (PEBS: every sampled load; IBS: loads that missed).
    pub latency: Option<u32>,
}

impl HwAccess {
    /// What a hardware sample says, or `None` for a software sample.
    #[must_use]
    pub fn of(sample: &AccessSample) -> Option<Self> {
        Self::of_on(sample, None)
    }

    /// [`HwAccess::of`] for a sample taken on `cpu` (family and model, from the profile
    /// header), so that the IBS decoder applies that CPU's quirks.
    #[must_use]
    pub fn of_on(sample: &AccessSample, cpu: Option<CpuModel>) -> Option<Self> {
        match sample.sampler {
            SAMPLER_KIND_IBS => Some(
                sample
                    .ibs
                    .and_then(|regs| ibs(sample, &regs, cpu))
                    .unwrap_or_else(|| generic(sample)),
            ),
            SAMPLER_KIND_PEBS => Some(generic(sample)),
            _ => None,
        }
    }
}

/// From the generic fields perf filled in (PEBS; IBS without registers).
fn generic(sample: &AccessSample) -> HwAccess {
    let src = (sample.hw_valid & HW_DATA_SRC != 0).then_some(DataSrc(sample.data_src));
    HwAccess {
        memory_op: true,
        addr: (sample.hw_valid & HW_DATA_ADDR != 0).then_some(sample.data_addr),
        kind: src.and_then(DataSrc::kind),
        size: None,
        miss: src.and_then(DataSrc::miss),
        source: src.map_or(MemSource::Unknown, DataSrc::source),
        hitm: src.is_some_and(DataSrc::hitm),
        latency: (sample.hw_valid & HW_LATENCY != 0).then_some(sample.latency),
    }
}

/// From the raw IBS registers, with the quirks of `cpu` (the decoder applies none without
/// it). Where the kernel filled in `data_src` it applied them itself, so HITM is taken from
/// there when present (the `cache_hit_st` bit is unreliable on some Zen 3 and Zen 4 models).
fn ibs(
    sample: &AccessSample,
    regs: &dprof_abi::IbsRegs,
    cpu: Option<CpuModel>,
) -> Option<HwAccess> {
    let mut raw = [0u8; dprof_abi::PERF_RAW_MAX];
    let len = regs.to_perf_raw(&mut raw);
    let op = IbsOpSample::decode(raw.get(..len)?).ok()?;
    let platform = Platform {
        cpu,
        ..Platform::from_caps(op.caps)
    };
    let kind = match op.mem_op() {
        MemOp::Load => Some(AccessKind::Read),
        MemOp::Store => Some(AccessKind::Write),
        MemOp::NotMemory => None,
    };
    let hitm = if sample.hw_valid & HW_DATA_SRC != 0 {
        DataSrc(sample.data_src).hitm()
    } else {
        op.cache_hit_state(platform) == Some(CacheHitState::Modified)
    };
    let addr = if sample.hw_valid & HW_DATA_ADDR != 0 {
        Some(sample.data_addr)
    } else {
        op.linear_address()
    };
    let latency = op
        .dc_miss_latency()
        .map(u32::from)
        .or_else(|| (sample.hw_valid & HW_LATENCY != 0).then_some(sample.latency));
    Some(HwAccess {
        memory_op: kind.is_some(),
        addr,
        kind,
        size: op.access_width(),
        miss: op.dc_miss(platform),
        source: mem_source_of_ibs(op.mem_level(platform)),
        hitm,
        latency,
    })
}
