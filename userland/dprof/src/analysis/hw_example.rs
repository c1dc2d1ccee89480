//! A synthetic hardware-sampler profile with known answers: the same accesses taken by AMD IBS
//! op (raw registers: `dc_miss`, data sources, `cache_hit_st`, `dc_miss_lat`) or by Intel PEBS
//! load latency (`perf_mem_data_src` values from Intel's tables, latencies).
//!
//! Built so that ranking by misses differs from ranking by samples: `task_struct` is sampled
//! most but hits L1, `skbuff_head_cache` is contended (HITM from another CCX and from the
//! local one) and misses most. It also has an access only the hardware address resolves (a
//! `push`, an op without instruction bytes), a decoded address the hardware contradicts (the
//! registers were read after the load), a miss at an unknown address, an op that is not a
//! memory access (IBS) and a user-mode sample. The expected numbers are in the module's tests
//! and the CLI's golden files.

use dprof_abi::{
    reg, AccessSample, Alloc, CacheInfo, IbsRegs, Record, ALLOC_KMALLOC, CACHE_NAME_BYTES,
    CACHE_ORIGIN_WALK, HW_DATA_ADDR, HW_DATA_SRC, HW_LATENCY, IBS_DC_LIN_AD, IBS_OP_CTL,
    IBS_OP_DATA2, IBS_OP_DATA3, SAMPLER_KIND_IBS, SAMPLER_KIND_PEBS, SAMPLER_KIND_SOFTWARE,
    SAMPLE_USER,
};

use super::example::{
    gs_base, load_jiffies, profile_with, JIFFIES, JIFFIES_READER_IP, KALLSYMS, KMALLOC_1K, KM_SKB,
    LOAD_RDI_70, LOAD_RDI_8, LOCK_INC_RDI_8, MOV_RAX_RDI, PUSH_RDI, RSP, SKB_A, SKB_B, SKB_CACHE,
    STORE_RDI_10, TASK, TASK_CACHE, UNKNOWN,
};
use crate::profile::example::{example_header, software_sample};
use crate::profile::{CpuId, PeriodEvents, PmuEvent, ProfileHeader, SamplingConfig};

/// Which hardware sampler took the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampler {
    /// AMD IBS op on a Zen 4 (raw registers).
    Ibs,
    /// Intel PEBS load latency (loads only: the stores and the non-memory op are left out).
    Pebs,
}

/// What served an access, as the example encodes it for either sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// An L1 hit.
    L1,
    /// L2.
    L2,
    /// The local L3 (AMD: the local CCX); `hitm`: another core had the line modified.
    L3 { hitm: bool },
    /// Another CCX's cache on the node (Intel: any cache on the node).
    Near { hitm: bool },
    /// A cache on another node.
    Remote { hitm: bool },
    /// Local DRAM.
    Dram,
    /// Remote DRAM.
    RemoteDram,
    /// An outstanding miss to the line (AMD's MAB, Intel's LFB).
    FillBuffer,
    /// A store that missed: IBS gives stores no source.
    StoreMiss,
    /// A store that hit L1.
    StoreHit,
    /// An op that is not a memory access.
    NotMemory,
}

/// IBS caps of a Zen 4: AVAIL, OPSAM, RDWROPCNT, OPCNT, BRNTRGT, OPCNTEXT, RIPINVALIDCHK,
/// OPBRNFUSE, OPDATA4, ZEN4.
pub const ZEN4_CAPS: u32 = 0xdfd;

/// PEBS latency of an L1 hit, in cycles.
pub const PEBS_L1_LATENCY: u32 = 5;

/// The raw IBS registers of an op at `addr` (8 bytes wide) served by `served` after `lat`
/// cycles (`IbsOpData3.dc_miss_lat`, given for load misses only).
#[must_use]
pub fn ibs_regs(served: Served, addr: u64, lat: u16) -> IbsRegs {
    // IbsOpData3: ld_op 0, st_op 1, dc_miss 7, dc_miss_no_mab_alloc 16, dc_lin_addr_valid
    // 17, l2_miss 20, op_mem_width 22-25 (4: 8 bytes), dc_miss_lat 32-47.
    const LOAD: u64 = 1 | (1 << 17) | (4 << 22);
    const STORE: u64 = 2 | (1 << 17) | (4 << 22);
    const DC_MISS: u64 = 1 << 7;
    const L2_MISS: u64 = 1 << 20;
    const NO_MAB: u64 = 1 << 16;
    let lat = u64::from(lat) << 32;
    let far = LOAD | DC_MISS | L2_MISS | lat;
    // IbsOpData2: data_src_lo 0-2, rmt_node 4, cache_hit_st 5 (0: Modified), data_src_hi
    // 6-7. Zen 4 codes: 1 local CCX, 2 near CCX, 3 DRAM, 5 far CCX.
    let owned = |hitm: bool| if hitm { 0 } else { 1 << 5 };
    let (data3, data2) = match served {
        Served::L1 => (LOAD, 0),
        Served::L2 => (LOAD | DC_MISS | lat, 0),
        Served::L3 { hitm } => (far, 1 | owned(hitm)),
        Served::Near { hitm } => (far, 2 | owned(hitm)),
        Served::Remote { hitm } => (far, 5 | owned(hitm)),
        Served::Dram => (far, 3),
        Served::RemoteDram => (far, 3 | (1 << 4)),
        Served::FillBuffer => (far | NO_MAB, 0),
        Served::StoreMiss => (STORE | DC_MISS | L2_MISS, 0),
        Served::StoreHit => (STORE, 0),
        Served::NotMemory => (0, 0),
    };
    let mut regs = IbsRegs {
        caps: ZEN4_CAPS,
        regs: [0; 9],
    };
    // op_val (bit 18), cnt_ctl (19), MaxCnt 0x4000 (a period of 0x40000).
    regs.regs[IBS_OP_CTL] = (1 << 18) | (1 << 19) | 0x4000;
    regs.regs[IBS_OP_DATA2] = data2;
    regs.regs[IBS_OP_DATA3] = data3;
    if served != Served::NotMemory {
        regs.regs[IBS_DC_LIN_AD] = addr;
    }
    regs
}

/// perf's `perf_mem_data_src` for a PEBS load served by `served` (Intel's Skylake table:
/// arch/x86/events/intel/ds.c); `None` for what PEBS load latency does not sample.
#[must_use]
pub fn pebs_data_src(served: Served) -> Option<u64> {
    // OP LOAD | LVL HIT, then level bits, LVLNUM << 33, REMOTE << 37, SNOOP << 19.
    const OP_LH: u64 = 0x42;
    const HITM: u64 = 0x10 << 19;
    const NONE: u64 = 0x02 << 19;
    const REMOTE: u64 = 1 << 37;
    let hitm_or_none = |hitm: bool| if hitm { HITM } else { NONE };
    Some(match served {
        Served::L1 => OP_LH | (0x08 << 5) | (0x01 << 33) | NONE,
        Served::L2 => OP_LH | (0x20 << 5) | (0x02 << 33) | NONE,
        Served::L3 { hitm } => OP_LH | (0x40 << 5) | (0x03 << 33) | hitm_or_none(hitm),
        Served::Near { hitm } => OP_LH | (0x0b << 33) | hitm_or_none(hitm),
        Served::Remote { hitm } => OP_LH | (0x0b << 33) | REMOTE | hitm_or_none(hitm),
        Served::Dram => OP_LH | (0x80 << 5) | (0x0d << 33) | (0x0a << 19),
        Served::RemoteDram => OP_LH | (0x0d << 33) | REMOTE | NONE,
        Served::FillBuffer => OP_LH | (0x10 << 5) | (0x0c << 33) | NONE,
        Served::StoreMiss | Served::StoreHit | Served::NotMemory => return None,
    })
}

/// One sampled access of the example.
#[derive(Clone, Copy, Debug)]
struct Access {
    cpu: u32,
    ip: u64,
    insn: &'static [u8],
    /// `%rdi` at the sample (what the decoder computes the address from).
    rdi: u64,
    /// The address the hardware reports.
    addr: u64,
    served: Served,
    /// Miss latency in cycles (IBS `dc_miss_lat`, PEBS latency of a miss).
    lat: u16,
}

const TCP_SENDMSG: u64 = 0xffff_ffff_8110_0000;
const TCP_RECVMSG: u64 = 0xffff_ffff_8110_1000;
const ALLOC_SKB: u64 = 0xffff_ffff_8120_0000;
const DUP_TASK: u64 = 0xffff_ffff_8131_0000;
const SCHEDULE: u64 = 0xffff_ffff_8132_0000;
const POLL: u64 = 0xffff_ffff_8150_0000;

/// The sampled accesses, in time order from t=2000 on, 100 ns apart.
#[allow(clippy::too_many_lines, reason = "a table of accesses")]
fn accesses() -> Vec<Access> {
    let at = |cpu, ip, insn, rdi: u64, offset: u64, served, lat| Access {
        cpu,
        ip,
        insn,
        rdi,
        addr: rdi + offset,
        served,
        lat,
    };
    let mut v = vec![
        // skbuff_head_cache: two L1 hits from the sender, then the receiver on CPU 1 misses.
        at(
            0,
            TCP_SENDMSG + 0x20,
            LOAD_RDI_70,
            SKB_A,
            0x70,
            Served::L1,
            0,
        ),
        at(
            0,
            TCP_SENDMSG + 0x20,
            LOAD_RDI_70,
            SKB_B,
            0x70,
            Served::L1,
            0,
        ),
        at(
            1,
            TCP_RECVMSG + 0x40,
            LOAD_RDI_70,
            SKB_A,
            0x70,
            Served::Near { hitm: true },
            240,
        ),
        at(
            1,
            TCP_RECVMSG + 0x50,
            LOAD_RDI_8,
            SKB_B,
            0x8,
            Served::L3 { hitm: true },
            120,
        ),
        at(
            1,
            TCP_RECVMSG + 0x50,
            LOAD_RDI_8,
            SKB_A,
            0x8,
            Served::Dram,
            300,
        ),
        at(
            0,
            TCP_SENDMSG + 0x10,
            STORE_RDI_10,
            SKB_A,
            0x10,
            Served::StoreMiss,
            0,
        ),
        // `lock incl`: IBS tags its load op.
        at(
            1,
            TCP_RECVMSG + 0x60,
            LOCK_INC_RDI_8,
            SKB_B,
            0x8,
            Served::L2,
            20,
        ),
        // kmalloc-1k@__alloc_skb: remote DRAM, then an op without instruction bytes that
        // only the hardware address resolves, waiting on the same line's fill.
        at(
            1,
            TCP_RECVMSG + 0x40,
            LOAD_RDI_70,
            KM_SKB,
            0x70,
            Served::RemoteDram,
            410,
        ),
        at(
            1,
            TCP_RECVMSG + 0x70,
            &[],
            KM_SKB,
            0x80,
            Served::FillBuffer,
            60,
        ),
        // The stack: `push %rdi` has an implicit operand the decoder does not name; the
        // hardware does.
        Access {
            cpu: 2,
            ip: SCHEDULE + 0x50,
            insn: PUSH_RDI,
            rdi: 0,
            addr: RSP - 8,
            served: Served::StoreHit,
            lat: 0,
        },
        // global jiffies, written by another node's core.
        Access {
            cpu: 2,
            ip: JIFFIES_READER_IP,
            insn: &[],
            rdi: 0,
            addr: JIFFIES,
            served: Served::Remote { hitm: true },
            lat: 520,
        },
        // A miss nothing resolves.
        at(3, POLL + 0x70, LOAD_RDI_8, UNKNOWN, 0x8, Served::Dram, 280),
        // Not a memory op.
        at(3, POLL + 0x64, MOV_RAX_RDI, 0, 0, Served::NotMemory, 0),
    ];
    // task_struct: sampled most, hits L1 but once.
    for i in 0..7 {
        let (insn, offset, served) = if i % 4 == 3 {
            (STORE_RDI_10, 0x10, Served::StoreHit)
        } else {
            (LOAD_RDI_8, 0x8, Served::L1)
        };
        let ip = SCHEDULE + if i % 4 == 3 { 0x48 } else { 0x40 };
        v.push(at(2, ip, insn, TASK, offset, served, 0));
    }
    v.push(at(
        2,
        SCHEDULE + 0x40,
        LOAD_RDI_8,
        TASK,
        0x8,
        Served::L2,
        14,
    ));
    // The registers were read after the load overwrote %rdi: the decoded address is wrong,
    // the hardware's is right.
    v.push(Access {
        cpu: 2,
        ip: SCHEDULE + 0x40,
        insn: LOAD_RDI_8,
        rdi: UNKNOWN,
        addr: TASK + 0x8,
        served: Served::L1,
        lat: 0,
    });
    v
}

/// The hardware sample of `a` taken by `sampler`, or `None` where that sampler would not
/// have taken one.
fn sample(sampler: Sampler, a: &Access) -> Option<AccessSample> {
    let (jiffies_insn, regs) = if a.ip == JIFFIES_READER_IP {
        (Some(load_jiffies()), vec![(reg::RSP, RSP)])
    } else {
        (None, vec![(reg::RSP, RSP), (reg::RDI, a.rdi)])
    };
    let insn: &[u8] = jiffies_insn.as_ref().map_or(a.insn, |b| &b[..]);
    let mut s = software_sample(a.ip, insn, &regs, gs_base(a.cpu));
    let load_miss = !matches!(
        a.served,
        Served::L1 | Served::StoreHit | Served::StoreMiss | Served::NotMemory
    );
    match sampler {
        Sampler::Ibs => {
            s.sampler = SAMPLER_KIND_IBS;
            s.ibs = Some(ibs_regs(a.served, a.addr, a.lat));
            if a.served != Served::NotMemory {
                s.hw_valid |= HW_DATA_ADDR;
                s.data_addr = a.addr;
            }
            if load_miss {
                s.hw_valid |= HW_LATENCY;
                s.latency = u32::from(a.lat);
            }
        }
        Sampler::Pebs => {
            s.sampler = SAMPLER_KIND_PEBS;
            s.data_src = pebs_data_src(a.served)?;
            s.hw_valid = HW_DATA_ADDR | HW_DATA_SRC | HW_LATENCY;
            s.data_addr = a.addr;
            s.latency = if load_miss {
                u32::from(a.lat)
            } else {
                PEBS_L1_LATENCY
            };
        }
    }
    Some(s)
}

fn info(cache: u64, object_size: u32, name: &[u8]) -> Record {
    Record::CacheInfo(
        CacheInfo {
            cache,
            object_size,
            size: object_size.next_power_of_two(),
            align: 8,
            slab_flags: 0,
            name_len: 0,
            origin: CACHE_ORIGIN_WALK,
            name: [0; CACHE_NAME_BYTES],
        }
        .with_name(name),
    )
}

fn alloc(ptr: u64, call_site: u64, cache: u64, bytes: u32, flags: u32) -> Record {
    Record::Alloc(Alloc {
        ptr,
        call_site,
        cache,
        bytes_req: bytes,
        bytes_alloc: bytes,
        gfp: 0xcc0,
        node: -1,
        flags,
    })
}

/// The records, in time order: (cpu, time, record), one Records section.
#[must_use]
pub fn records(sampler: Sampler) -> Vec<(u32, u64, Record)> {
    let mut out = vec![
        (0, 100, info(SKB_CACHE, 232, b"skbuff_head_cache")),
        (0, 101, info(TASK_CACHE, 4096, b"task_struct")),
        (0, 102, info(KMALLOC_1K, 1024, b"kmalloc-1k")),
        (0, 1_000, alloc(SKB_A, ALLOC_SKB + 0x42, SKB_CACHE, 256, 0)),
        (0, 1_100, alloc(SKB_B, ALLOC_SKB + 0x42, SKB_CACHE, 256, 0)),
        (
            0,
            1_200,
            alloc(KM_SKB, ALLOC_SKB + 0x80, KMALLOC_1K, 1024, ALLOC_KMALLOC),
        ),
        (2, 1_300, alloc(TASK, DUP_TASK + 0x20, TASK_CACHE, 4096, 0)),
    ];
    let mut t = 2_000;
    for a in accesses() {
        if let Some(s) = sample(sampler, &a) {
            out.push((a.cpu, t, Record::AccessSample(s)));
        }
        t += 100;
    }
    let mut user = software_sample(0x40_1000, MOV_RAX_RDI, &[], 0);
    user.flags = SAMPLE_USER;
    user.sampler = match sampler {
        Sampler::Ibs => SAMPLER_KIND_IBS,
        Sampler::Pebs => SAMPLER_KIND_PEBS,
    };
    if sampler == Sampler::Ibs {
        user.ibs = Some(ibs_regs(Served::L1, 0x7ffd_0000_1000, 0));
    }
    out.push((3, t, Record::AccessSample(user)));
    out
}

/// The header: the example's, with the hardware sampler named.
#[must_use]
pub fn header(sampler: Sampler) -> ProfileHeader {
    let mut h = example_header();
    let name = match sampler {
        Sampler::Ibs => "ibs",
        Sampler::Pebs => "pebs",
    };
    let model = match sampler {
        Sampler::Ibs => "AMD EPYC 9654 96-Core Processor",
        Sampler::Pebs => "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
    };
    model.clone_into(&mut h.cpu_model);
    h.cpu_id = Some(match sampler {
        // Genoa: Zen 4, none of the family 0x19 model 0x0-0xF quirks.
        Sampler::Ibs => CpuId {
            vendor: "AuthenticAMD".to_owned(),
            family: 0x19,
            model: 0x11,
        },
        Sampler::Pebs => CpuId {
            vendor: "GenuineIntel".to_owned(),
            family: 6,
            model: 85,
        },
    });
    h.config.sampling = Some(SamplingConfig {
        sampler: name.to_owned(),
        period_ns: 0,
        user: false,
        period_events: Some(PeriodEvents {
            count: match sampler {
                Sampler::Ibs => 0x4_0000,
                Sampler::Pebs => 100_003,
            },
            unit: match sampler {
                Sampler::Ibs => "ops",
                Sampler::Pebs => "loads",
            }
            .to_owned(),
        }),
        pmu: Some(match sampler {
            Sampler::Ibs => PmuEvent {
                pmu: "ibs_op".to_owned(),
                pmu_type: 11,
                config: 1 << 19,
                config1: 0,
            },
            Sampler::Pebs => PmuEvent {
                pmu: "cpu".to_owned(),
                pmu_type: 4,
                config: 0x1cd,
                config1: 3,
            },
        }),
    });
    h.module.samplers |= match sampler {
        Sampler::Ibs => dprof_abi::SAMPLER_IBS,
        Sampler::Pebs => dprof_abi::SAMPLER_PEBS,
    };
    h
}

/// The whole profile.
#[must_use]
pub fn profile(sampler: Sampler) -> Vec<u8> {
    profile_with(&header(sampler), KALLSYMS, &[records(sampler)])
}

/// Samples the software sampler would have taken of the same instructions: none of them has
/// hardware data, so reports of it rank by samples.
#[must_use]
pub fn software_records() -> Vec<(u32, u64, Record)> {
    records(Sampler::Pebs)
        .into_iter()
        .map(|(cpu, t, r)| match r {
            Record::AccessSample(mut s) => {
                s.sampler = SAMPLER_KIND_SOFTWARE;
                s.hw_valid = 0;
                s.data_addr = 0;
                s.data_src = 0;
                s.latency = 0;
                (cpu, t, Record::AccessSample(s))
            }
            other => (cpu, t, other),
        })
        .collect()
}
