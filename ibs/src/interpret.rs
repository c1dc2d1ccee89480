//! What an op sample says about its memory access, following Linux 6.12's
//! `arch/x86/events/amd/ibs.c` (`perf_ibs_get_mem_lvl`, `perf_ibs_get_mem_snoop`,
//! `perf_ibs_get_tlb_lvl`, the weight and address logic of `perf_ibs_parse_ld_st_data`) and
//! perf's own dump (`tools/perf/util/amd-sample-raw.c`) for what the kernel leaves out.
//!
//! The data-source table depends on the CPU. The kernel picks it with `IBS_CAPS_ZEN4`
//! (CPUID `Fn8000_001B` EAX bit 11, shown as the `ibs_op` PMU's `zen4_ibs_extensions` cap):
//! with it `DataSrc` is 5 bits, `data_src_hi:data_src_lo`; without it only `data_src_lo`
//! counts. Since every raw blob carries the caps word, [`DataSrcEncoding::from_caps`] makes
//! the same choice. Family/model quirks (erratum #1293, unreliable `cache_hit_st`) need the
//! CPU model, which the blob lacks: [`Platform::cpu`] is optional.

use core::fmt;

use crate::caps::Caps;
use crate::period::CountUnit;
use crate::registers::{IbsOpData2, IbsOpData3};
use crate::sample::IbsOpSample;

/// `IBS_DATA_SRC_LOC_CACHE`: pre-Zen4 local node cache.
pub const IBS_DATA_SRC_LOC_CACHE: u8 = 2;
/// `IBS_DATA_SRC_DRAM`: pre-Zen4 DRAM.
pub const IBS_DATA_SRC_DRAM: u8 = 3;
/// `IBS_DATA_SRC_REM_CACHE`: pre-Zen4 remote node cache.
pub const IBS_DATA_SRC_REM_CACHE: u8 = 4;
/// `IBS_DATA_SRC_IO`: pre-Zen4 MMIO, config, PCI or APIC.
pub const IBS_DATA_SRC_IO: u8 = 7;
/// `IBS_DATA_SRC_EXT_LOC_CACHE`: Zen4 local L3 or another L1/L2 in the CCX.
pub const IBS_DATA_SRC_EXT_LOC_CACHE: u8 = 1;
/// `IBS_DATA_SRC_EXT_NEAR_CCX_CACHE`: Zen4 another CCX's cache on the same node.
pub const IBS_DATA_SRC_EXT_NEAR_CCX_CACHE: u8 = 2;
/// `IBS_DATA_SRC_EXT_DRAM`: Zen4 DRAM.
pub const IBS_DATA_SRC_EXT_DRAM: u8 = 3;
/// `IBS_DATA_SRC_EXT_FAR_CCX_CACHE`: Zen4 another CCX's cache on a different node.
pub const IBS_DATA_SRC_EXT_FAR_CCX_CACHE: u8 = 5;
/// `IBS_DATA_SRC_EXT_PMEM`: Zen4 long-latency (persistent) memory.
pub const IBS_DATA_SRC_EXT_PMEM: u8 = 6;
/// `IBS_DATA_SRC_EXT_IO`: Zen4 MMIO, config, PCI or APIC.
pub const IBS_DATA_SRC_EXT_IO: u8 = 7;
/// `IBS_DATA_SRC_EXT_EXT_MEM`: Zen4 extension memory (CXL).
pub const IBS_DATA_SRC_EXT_EXT_MEM: u8 = 8;
/// `IBS_DATA_SRC_EXT_PEER_AGENT_MEM`: Zen4 coherent memory of another processor type.
pub const IBS_DATA_SRC_EXT_PEER_AGENT_MEM: u8 = 12;

/// Every `IBS_DATA_SRC_*` constant with its header name, for checking against the header.
pub const DATA_SRC_CODES: [(&str, u8); 12] = [
    ("IBS_DATA_SRC_LOC_CACHE", IBS_DATA_SRC_LOC_CACHE),
    ("IBS_DATA_SRC_DRAM", IBS_DATA_SRC_DRAM),
    ("IBS_DATA_SRC_REM_CACHE", IBS_DATA_SRC_REM_CACHE),
    ("IBS_DATA_SRC_IO", IBS_DATA_SRC_IO),
    ("IBS_DATA_SRC_EXT_LOC_CACHE", IBS_DATA_SRC_EXT_LOC_CACHE),
    (
        "IBS_DATA_SRC_EXT_NEAR_CCX_CACHE",
        IBS_DATA_SRC_EXT_NEAR_CCX_CACHE,
    ),
    ("IBS_DATA_SRC_EXT_DRAM", IBS_DATA_SRC_EXT_DRAM),
    (
        "IBS_DATA_SRC_EXT_FAR_CCX_CACHE",
        IBS_DATA_SRC_EXT_FAR_CCX_CACHE,
    ),
    ("IBS_DATA_SRC_EXT_PMEM", IBS_DATA_SRC_EXT_PMEM),
    ("IBS_DATA_SRC_EXT_IO", IBS_DATA_SRC_EXT_IO),
    ("IBS_DATA_SRC_EXT_EXT_MEM", IBS_DATA_SRC_EXT_EXT_MEM),
    (
        "IBS_DATA_SRC_EXT_PEER_AGENT_MEM",
        IBS_DATA_SRC_EXT_PEER_AGENT_MEM,
    ),
];

/// Which `DataSrc` table applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataSrcEncoding {
    /// 3-bit `data_src_lo`, `IBS_DATA_SRC_*`.
    PreZen4,
    /// 5-bit `data_src_hi:data_src_lo`, `IBS_DATA_SRC_EXT_*`.
    Zen4,
}

impl DataSrcEncoding {
    /// The kernel's choice: Zen4 exactly when caps has `IBS_CAPS_ZEN4`.
    #[must_use]
    pub const fn from_caps(caps: Caps) -> Self {
        if caps.contains(Caps::ZEN4) {
            DataSrcEncoding::Zen4
        } else {
            DataSrcEncoding::PreZen4
        }
    }

    /// The `DataSrc` code in `data2` (`perf_ibs_data_src`).
    #[must_use]
    pub const fn code(self, data2: IbsOpData2) -> u8 {
        match self {
            DataSrcEncoding::Zen4 => (data2.data_src_hi() << 3) | data2.data_src_lo(),
            DataSrcEncoding::PreZen4 => data2.data_src_lo(),
        }
    }

    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DataSrcEncoding::PreZen4 => "pre-zen4",
            DataSrcEncoding::Zen4 => "zen4",
        }
    }
}

/// Where a load's data came from beyond the core's own L1/L2, by `IbsOpData2`'s `DataSrc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataSource {
    /// Code 0: no valid status.
    NoStatus,
    /// The local CCX: its L3 or another core's L1/L2 in it (pre-Zen4 2 "local node cache",
    /// Zen4 1).
    LocalCcxCache,
    /// Another CCX's cache on the same node (Zen4 2).
    NearCcxCache,
    /// A cache on another node (pre-Zen4 4 "remote node cache", Zen4 5 "another CCX cache
    /// in a different NUMA node").
    FarCache,
    /// DRAM (pre-Zen4 and Zen4 3); `remote` from `rmt_node`.
    Dram { remote: bool },
    /// Long-latency memory, perf's PMEM (Zen4 6); `remote` from `rmt_node`.
    Pmem { remote: bool },
    /// Extension memory, perf's CXL (Zen4 8); `remote` from `rmt_node`.
    ExtensionMemory { remote: bool },
    /// MMIO, config space, PCI or APIC (7 in both tables).
    Io,
    /// Coherent memory of a different processor type (Zen4 12).
    PeerAgentMemory,
    /// A code neither table defines.
    Reserved(u8),
}

impl DataSource {
    /// Decodes `data2` with `encoding`. `rmt_node` counts only where the kernel applies it:
    /// DRAM, and on Zen4 also PMEM and extension memory.
    #[must_use]
    pub const fn decode(data2: IbsOpData2, encoding: DataSrcEncoding) -> Self {
        let code = encoding.code(data2);
        let remote = data2.rmt_node();
        match encoding {
            DataSrcEncoding::PreZen4 => match code {
                0 => DataSource::NoStatus,
                IBS_DATA_SRC_LOC_CACHE => DataSource::LocalCcxCache,
                IBS_DATA_SRC_DRAM => DataSource::Dram { remote },
                IBS_DATA_SRC_REM_CACHE => DataSource::FarCache,
                IBS_DATA_SRC_IO => DataSource::Io,
                _ => DataSource::Reserved(code),
            },
            DataSrcEncoding::Zen4 => match code {
                0 => DataSource::NoStatus,
                IBS_DATA_SRC_EXT_LOC_CACHE => DataSource::LocalCcxCache,
                IBS_DATA_SRC_EXT_NEAR_CCX_CACHE => DataSource::NearCcxCache,
                IBS_DATA_SRC_EXT_DRAM => DataSource::Dram { remote },
                IBS_DATA_SRC_EXT_FAR_CCX_CACHE => DataSource::FarCache,
                IBS_DATA_SRC_EXT_PMEM => DataSource::Pmem { remote },
                IBS_DATA_SRC_EXT_IO => DataSource::Io,
                IBS_DATA_SRC_EXT_EXT_MEM => DataSource::ExtensionMemory { remote },
                IBS_DATA_SRC_EXT_PEER_AGENT_MEM => DataSource::PeerAgentMemory,
                _ => DataSource::Reserved(code),
            },
        }
    }

    /// Whether the source is some core's cache.
    #[must_use]
    pub const fn is_cache(self) -> bool {
        matches!(
            self,
            DataSource::LocalCcxCache | DataSource::NearCcxCache | DataSource::FarCache
        )
    }

    /// Whether the data came from another node.
    #[must_use]
    pub const fn is_remote_node(self) -> bool {
        matches!(
            self,
            DataSource::FarCache
                | DataSource::Dram { remote: true }
                | DataSource::Pmem { remote: true }
                | DataSource::ExtensionMemory { remote: true }
        )
    }

    /// Whether the kernel's table for `encoding` has an entry (`g_data_src`,
    /// `g_zen4_data_src`). Peer-agent memory is in the header but not in 6.12's table, so
    /// perf reports such loads by their MAB state instead.
    #[must_use]
    pub const fn kernel_has_entry(self) -> bool {
        !matches!(
            self,
            DataSource::NoStatus | DataSource::PeerAgentMemory | DataSource::Reserved(_)
        )
    }

    /// A short stable name for machine-readable output.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DataSource::NoStatus => "none",
            DataSource::LocalCcxCache => "local_ccx_cache",
            DataSource::NearCcxCache => "near_ccx_cache",
            DataSource::FarCache => "far_cache",
            DataSource::Dram { remote: false } => "dram",
            DataSource::Dram { remote: true } => "remote_dram",
            DataSource::Pmem { remote: false } => "pmem",
            DataSource::Pmem { remote: true } => "remote_pmem",
            DataSource::ExtensionMemory { remote: false } => "ext_mem",
            DataSource::ExtensionMemory { remote: true } => "remote_ext_mem",
            DataSource::Io => "io",
            DataSource::PeerAgentMemory => "peer_agent_mem",
            DataSource::Reserved(_) => "reserved",
        }
    }
}

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let remote = |r: bool| if r { "remote node " } else { "local node " };
        match *self {
            DataSource::NoStatus => f.write_str("no valid status"),
            DataSource::LocalCcxCache => f.write_str("local CCX cache (L3 or another L1/L2)"),
            DataSource::NearCcxCache => f.write_str("another CCX's cache, same node"),
            DataSource::FarCache => f.write_str("a cache on another node"),
            DataSource::Dram { remote: r } => write!(f, "{}DRAM", remote(r)),
            DataSource::Pmem { remote: r } => write!(f, "{}long-latency memory (PMEM)", remote(r)),
            DataSource::ExtensionMemory { remote: r } => {
                write!(f, "{}extension memory (CXL)", remote(r))
            }
            DataSource::Io => f.write_str("MMIO/config/PCI/APIC"),
            DataSource::PeerAgentMemory => {
                f.write_str("coherent memory of a different processor type")
            }
            DataSource::Reserved(code) => write!(f, "reserved code {code}"),
        }
    }
}

/// Load or store, `ld_op` winning as in `perf_ibs_get_mem_op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemOp {
    Load,
    Store,
    /// Neither: not a memory op.
    NotMemory,
}

impl MemOp {
    #[must_use]
    pub const fn of(data3: IbsOpData3) -> Self {
        if data3.ld_op() {
            MemOp::Load
        } else if data3.st_op() {
            MemOp::Store
        } else {
            MemOp::NotMemory
        }
    }

    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            MemOp::Load => "load",
            MemOp::Store => "store",
            MemOp::NotMemory => "none",
        }
    }
}

/// The memory level perf reports for the access (`perf_ibs_get_mem_lvl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemLevel {
    /// An uncacheable access that is not I/O: the miss fields mean nothing.
    Uncached,
    /// Hit in the L1 data cache.
    L1,
    /// Missed L1, hit L2.
    L2,
    /// A load that missed L2, served from the data source (one the kernel's table has).
    Source(DataSource),
    /// Hit an outstanding miss (`dc_miss_no_mab_alloc`), perf's LFB.
    MissBuffer,
    /// Nothing to report: not a valid memory op, a store past L2, or an unknown source.
    NotAvailable,
}

impl MemLevel {
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            MemLevel::Uncached => "uncached",
            MemLevel::L1 => "l1",
            MemLevel::L2 => "l2",
            MemLevel::Source(_) => "source",
            MemLevel::MissBuffer => "miss_buffer",
            MemLevel::NotAvailable => "na",
        }
    }
}

impl fmt::Display for MemLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemLevel::Uncached => f.write_str("uncached"),
            MemLevel::L1 => f.write_str("L1 hit"),
            MemLevel::L2 => f.write_str("L2 hit"),
            MemLevel::Source(source) => write!(f, "{source}"),
            MemLevel::MissBuffer => f.write_str("outstanding miss (MAB)"),
            MemLevel::NotAvailable => f.write_str("not available"),
        }
    }
}

/// The state of the line in the cache that supplied it (`cache_hit_st`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheHitState {
    /// `cache_hit_st` = 0: Modified; perf reports a HITM snoop.
    Modified,
    /// `cache_hit_st` = 1: Owned (perf's dump says "O-State").
    Owned,
}

impl CacheHitState {
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            CacheHitState::Modified => "M",
            CacheHitState::Owned => "O",
        }
    }
}

/// The page size of a TLB hit, from the hit-size bits of the level that hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageSize {
    Size4K,
    Size2M,
    Size1G,
    /// Both the 2M and the 1G bit are set.
    Conflicting,
}

impl PageSize {
    const fn from_bits(two_meg: bool, one_gig: bool) -> Self {
        match (two_meg, one_gig) {
            (false, false) => PageSize::Size4K,
            (true, false) => PageSize::Size2M,
            (false, true) => PageSize::Size1G,
            (true, true) => PageSize::Conflicting,
        }
    }

    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            PageSize::Size4K => "4K",
            PageSize::Size2M => "2M",
            PageSize::Size1G => "1G",
            PageSize::Conflicting => "2M+1G",
        }
    }
}

/// Which data TLB level translated the address (`perf_ibs_get_tlb_lvl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlbOutcome {
    /// Hit in the L1 TLB (`dc_l1tlb_hit_2m`, `dc_l1tlb_hit_1g` give the size).
    L1Hit(PageSize),
    /// Missed L1, hit L2 (`dc_l2tlb_hit_2m`, `dc_l2_tlb_hit_1g` give the size).
    L2Hit(PageSize),
    /// Missed both: a page walk.
    L2Miss,
}

impl fmt::Display for TlbOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlbOutcome::L1Hit(size) => write!(f, "L1 TLB hit, {} page", size.as_str()),
            TlbOutcome::L2Hit(size) => write!(f, "L1 TLB miss, L2 TLB hit, {} page", size.as_str()),
            TlbOutcome::L2Miss => f.write_str("L1 and L2 TLB miss"),
        }
    }
}

/// A CPU's family and model as `/proc/cpuinfo` gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuModel {
    pub family: u32,
    pub model: u32,
}

/// What the interpretation depends on besides the registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Platform {
    pub encoding: DataSrcEncoding,
    /// Needed for the family/model quirks; `None` assumes none apply.
    pub cpu: Option<CpuModel>,
}

impl Platform {
    /// The kernel's table choice from `caps`, with no CPU model.
    #[must_use]
    pub const fn from_caps(caps: Caps) -> Self {
        Platform {
            encoding: DataSrcEncoding::from_caps(caps),
            cpu: None,
        }
    }

    /// Erratum #1293 (family 0x19, models 0x0-0xF): with `sw_pf` or `dc_miss_no_mab_alloc`
    /// the kernel discards `IbsOpData2` and does not trust `l2_miss`.
    #[must_use]
    pub const fn erratum_1293(self) -> bool {
        matches!(self.cpu, Some(CpuModel { family: 0x19, model }) if model <= 0xF)
    }

    /// Whether `cache_hit_st` means anything: the kernel ignores it on family 0x19 models
    /// 0x0-0xF and 0x20-0x5F (`perf_ibs_cache_hit_st_valid`). `None` without a CPU model.
    #[must_use]
    pub const fn cache_hit_st_reliable(self) -> Option<bool> {
        match self.cpu {
            Some(CpuModel {
                family: 0x19,
                model,
            }) => Some(!(model <= 0xF || (model >= 0x20 && model <= 0x5F))),
            Some(_) => Some(true),
            None => None,
        }
    }
}

/// Everything [`IbsOpSample::interpret`] derives, for printing in one go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interpretation {
    pub platform: Platform,
    pub valid: bool,
    pub mem_op: MemOp,
    pub data_source: Option<DataSource>,
    pub mem_level: MemLevel,
    pub cache_hit_state: Option<CacheHitState>,
    pub dc_miss: Option<bool>,
    pub l2_miss: Option<bool>,
    pub dc_miss_latency: Option<u16>,
    pub tlb: Option<TlbOutcome>,
    pub tlb_refill_latency: Option<u16>,
    pub access_width: Option<u32>,
    pub rip: Option<u64>,
    pub linear_address: Option<u64>,
    pub physical_address: Option<u64>,
    pub branch_target: Option<u64>,
    pub period: u64,
    pub count_unit: CountUnit,
}

impl IbsOpSample {
    /// Load, store or neither; [`MemOp::NotMemory`] for an invalid sample.
    #[must_use]
    pub const fn mem_op(&self) -> MemOp {
        if self.is_valid() {
            MemOp::of(self.op_data3)
        } else {
            MemOp::NotMemory
        }
    }

    /// Whether erratum #1293 voids `IbsOpData2` and `l2_miss` for this sample.
    const fn erratum_1293_hits(&self, platform: Platform) -> bool {
        platform.erratum_1293() && (self.op_data3.sw_pf() || self.op_data3.dc_miss_no_mab_alloc())
    }

    /// `IbsOpData2` as the kernel uses it (`perf_ibs_get_op_data2`): zero under erratum
    /// #1293.
    #[must_use]
    pub const fn effective_data2(&self, platform: Platform) -> IbsOpData2 {
        if self.erratum_1293_hits(platform) {
            IbsOpData2(0)
        } else {
            self.op_data2
        }
    }

    /// The data source; only loads have one (`IbsOpData2` is valid for loads only).
    #[must_use]
    pub const fn data_source(&self, platform: Platform) -> Option<DataSource> {
        match self.mem_op() {
            MemOp::Load => Some(DataSource::decode(
                self.effective_data2(platform),
                platform.encoding,
            )),
            MemOp::Store | MemOp::NotMemory => None,
        }
    }

    /// Whether the access is uncacheable and not I/O, which voids the miss fields.
    const fn uncached_non_io(&self, platform: Platform) -> bool {
        self.op_data3.dc_uc_mem_acc()
            && platform.encoding.code(self.effective_data2(platform)) != IBS_DATA_SRC_EXT_IO
    }

    /// The memory level perf reports, step by step as `perf_ibs_get_mem_lvl`.
    #[must_use]
    pub const fn mem_level(&self, platform: Platform) -> MemLevel {
        let op = self.mem_op();
        if matches!(op, MemOp::NotMemory) {
            return MemLevel::NotAvailable;
        }
        let data3 = self.op_data3;
        if self.uncached_non_io(platform) {
            return MemLevel::Uncached;
        }
        if !data3.dc_miss() {
            return MemLevel::L1;
        }
        if !data3.l2_miss() && !self.erratum_1293_hits(platform) {
            return MemLevel::L2;
        }
        if let Some(source) = self.data_source(platform) {
            if source.kernel_has_entry() {
                return MemLevel::Source(source);
            }
        }
        if data3.dc_miss_no_mab_alloc() {
            MemLevel::MissBuffer
        } else {
            MemLevel::NotAvailable
        }
    }

    /// The line's state in the supplying cache, where the kernel would look at it
    /// (`perf_ibs_get_mem_snoop`): a load that went past L2 to a cache the table for this
    /// encoding marks as one whose state is reported, on a CPU whose `cache_hit_st` is not
    /// known to be broken.
    #[must_use]
    pub const fn cache_hit_state(&self, platform: Platform) -> Option<CacheHitState> {
        if !matches!(self.mem_op(), MemOp::Load)
            || matches!(platform.cache_hit_st_reliable(), Some(false))
            || matches!(self.mem_level(platform), MemLevel::L1 | MemLevel::L2)
        {
            return None;
        }
        let data2 = self.effective_data2(platform);
        let code = platform.encoding.code(data2);
        let reported = match platform.encoding {
            DataSrcEncoding::PreZen4 => code == IBS_DATA_SRC_LOC_CACHE,
            DataSrcEncoding::Zen4 => {
                code == IBS_DATA_SRC_EXT_LOC_CACHE
                    || code == IBS_DATA_SRC_EXT_NEAR_CCX_CACHE
                    || code == IBS_DATA_SRC_EXT_FAR_CCX_CACHE
            }
        };
        if !reported {
            None
        } else if data2.cache_hit_st() {
            Some(CacheHitState::Owned)
        } else {
            Some(CacheHitState::Modified)
        }
    }

    /// `dc_miss` for a memory op whose miss fields mean something.
    #[must_use]
    pub const fn dc_miss(&self, platform: Platform) -> Option<bool> {
        if matches!(self.mem_op(), MemOp::NotMemory) || self.uncached_non_io(platform) {
            None
        } else {
            Some(self.op_data3.dc_miss())
        }
    }

    /// `l2_miss` for a memory op whose miss fields mean something and that erratum #1293
    /// leaves alone.
    #[must_use]
    pub const fn l2_miss(&self, platform: Platform) -> Option<bool> {
        if matches!(self.mem_op(), MemOp::NotMemory)
            || self.uncached_non_io(platform)
            || self.erratum_1293_hits(platform)
        {
            None
        } else {
            Some(self.op_data3.l2_miss())
        }
    }

    /// Cycles a missing load waited (`dc_miss_lat`), for a load with `dc_miss`: the
    /// sample weight perf reports.
    #[must_use]
    pub const fn dc_miss_latency(&self) -> Option<u16> {
        if matches!(self.mem_op(), MemOp::Load) && self.op_data3.dc_miss() {
            Some(self.op_data3.dc_miss_lat())
        } else {
            None
        }
    }

    /// The data TLB level that translated the address, when the linear address is valid.
    #[must_use]
    pub const fn tlb(&self) -> Option<TlbOutcome> {
        let d = self.op_data3;
        if !self.is_valid() || !d.dc_lin_addr_valid() {
            None
        } else if !d.dc_l1tlb_miss() {
            Some(TlbOutcome::L1Hit(PageSize::from_bits(
                d.dc_l1tlb_hit_2m(),
                d.dc_l1tlb_hit_1g(),
            )))
        } else if !d.dc_l2tlb_miss() {
            Some(TlbOutcome::L2Hit(PageSize::from_bits(
                d.dc_l2tlb_hit_2m(),
                d.dc_l2_tlb_hit_1g(),
            )))
        } else {
            Some(TlbOutcome::L2Miss)
        }
    }

    /// Cycles to refill the L1 TLB (`tlb_refill_lat`), when there was an L1 TLB miss to
    /// refill (and the translation is reported at all).
    #[must_use]
    pub const fn tlb_refill_latency(&self) -> Option<u16> {
        if matches!(self.tlb(), Some(TlbOutcome::L2Hit(_) | TlbOutcome::L2Miss)) {
            Some(self.op_data3.tlb_refill_lat())
        } else {
            None
        }
    }

    /// The access size in bytes: `op_mem_width` n != 0 means 2^(n-1) bytes (perf's dump).
    #[must_use]
    pub const fn access_width(&self) -> Option<u32> {
        match self.op_data3.op_mem_width() {
            0 => None,
            n => Some(1 << (n - 1)),
        }
    }

    /// Everything above at once.
    #[must_use]
    pub const fn interpret(&self, platform: Platform) -> Interpretation {
        Interpretation {
            platform,
            valid: self.is_valid(),
            mem_op: self.mem_op(),
            data_source: self.data_source(platform),
            mem_level: self.mem_level(platform),
            cache_hit_state: self.cache_hit_state(platform),
            dc_miss: self.dc_miss(platform),
            l2_miss: self.l2_miss(platform),
            dc_miss_latency: self.dc_miss_latency(),
            tlb: self.tlb(),
            tlb_refill_latency: self.tlb_refill_latency(),
            access_width: self.access_width(),
            rip: self.rip(),
            linear_address: self.linear_address(),
            physical_address: self.physical_address(),
            branch_target: self.branch_target(),
            period: self.op_ctl.period(self.caps.contains(Caps::OPCNTEXT)),
            count_unit: self.op_ctl.count_unit(),
        }
    }
}
