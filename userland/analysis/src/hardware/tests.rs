use dprof_abi::{
    AccessSample, IbsRegs, HW_DATA_ADDR, HW_DATA_SRC, HW_LATENCY, IBS_DC_LIN_AD, IBS_OP_CTL,
    IBS_OP_DATA2, IBS_OP_DATA3, SAMPLER_KIND_IBS, SAMPLER_KIND_PEBS, SAMPLER_KIND_SOFTWARE,
};

use super::*;
use dprof_model::MemSource;

/// `perf_mem_data_src` values worked out by hand from the uapi header's shifts, as Intel's
/// PEBS tables (arch/x86/events/intel/ds.c) build them.
#[test]
fn data_src_fields_decode_by_hand() {
    // 0x01 "L1 local": OP LOAD 0x2 | LVL HIT 0x2<<5 | LVL L1 0x8<<5 | SNOOP NONE 0x2<<19 |
    // LVLNUM L1 1<<33.
    let l1 = DataSrc(0x2_0010_0142);
    assert_eq!(l1.mem_op(), perf::MEM_OP_LOAD);
    assert_eq!(l1.mem_lvl(), perf::MEM_LVL_HIT | perf::MEM_LVL_L1);
    assert_eq!(l1.mem_snoop(), perf::MEM_SNOOP_NONE);
    assert_eq!(l1.mem_lvl_num(), perf::MEM_LVLNUM_L1);
    assert!(!l1.mem_remote());
    assert_eq!(
        (l1.source(), l1.miss(), l1.hitm()),
        (MemSource::L1, Some(false), false)
    );
    assert_eq!(l1.kind(), Some(AccessKind::Read));
    // The same value built from the constants.
    let built = (perf::MEM_OP_LOAD << perf::MEM_OP_SHIFT)
        | ((perf::MEM_LVL_HIT | perf::MEM_LVL_L1) << perf::MEM_LVL_SHIFT)
        | (perf::MEM_SNOOP_NONE << perf::MEM_SNOOP_SHIFT)
        | (perf::MEM_LVLNUM_L1 << perf::MEM_LVLNUM_SHIFT);
    assert_eq!(built, l1.0);

    let cases: [(u64, MemSource, Option<bool>, bool); 14] = [
        // 0x02 LFB hit: LVL LFB 0x10<<5, LVLNUM LFB 0xc<<33.
        (0x18_0010_0242, MemSource::FillBuffer, Some(true), false),
        // 0x03 L2 hit.
        (0x4_0010_0442, MemSource::L2, Some(true), false),
        // 0x04 L3 hit, no snoop.
        (0x6_0010_0842, MemSource::L3, Some(true), false),
        // 0x07 L3 hit, snoop HITM 0x10<<19.
        (0x6_0080_0842, MemSource::L3, Some(true), true),
        // 0x00 "unknown L3": OP LOAD | LVL MISS 0x4<<5 | LVLNUM L3 | SNOOP NA.
        (0x6_0008_0082, MemSource::Unknown, Some(true), false),
        // 0x0c (Sandy Bridge) L3 miss, local RAM: LVL LOC_RAM 0x80<<5, LVLNUM RAM 0xd<<33,
        // SNOOP NONE|MISS.
        (0x1a_0050_1042, MemSource::Dram, Some(true), false),
        // 0x0b (Skylake) remote RAM: LVLNUM RAM | REMOTE 1<<37 | SNOOP NONE.
        (0x3a_0010_0042, MemSource::RemoteDram, Some(true), false),
        // 0x0b (Sandy Bridge): LVL REM_RAM1 0x100<<5 | REMOTE | LVLNUM L3 | SNOOP HIT.
        (0x26_0020_2042, MemSource::RemoteDram, Some(true), false),
        // 0x08 (Sandy Bridge): LVL REM_CCE1 0x400<<5 | REMOTE | LVLNUM L3 | SNOOP HIT.
        (0x26_0020_8042, MemSource::RemoteCache, Some(true), false),
        // 0x0d (Skylake): LVLNUM ANY_CACHE 0xb<<33 | REMOTE | SNOOP HITM.
        (0x36_0080_0042, MemSource::RemoteCache, Some(true), true),
        // 0x0c (Skylake): ANY_CACHE | REMOTE | SNOOPX FWD 1<<38: a clean forward, no HITM.
        (0x76_0000_0042, MemSource::RemoteCache, Some(true), false),
        // 0x0e I/O: LVL IO 0x1000<<5 | LVLNUM NA 0xf<<33.
        (0x1e_0012_0042, MemSource::Io, Some(true), false),
        // Old style, mem_lvl only: LOAD | HIT | L2.
        (0x442, MemSource::L2, Some(true), false),
        // PERF_MEM_NA: every field "not available".
        (0x0508_0021, MemSource::Unknown, None, false),
    ];
    for (value, source, miss, hitm) in cases {
        let d = DataSrc(value);
        assert_eq!(
            (d.source(), d.miss(), d.hitm()),
            (source, miss, hitm),
            "{value:#x}"
        );
    }
    // AMD IBS through perf: another CCX on the same node is LVLNUM ANY_CACHE | HOPS_0.
    let near = DataSrc(0x42 | (0xb << 33) | (1 << 43));
    assert_eq!((near.source(), near.mem_hops()), (MemSource::NearCache, 1));
    assert_eq!(DataSrc(0x76_0000_0042).mem_snoopx(), perf::MEM_SNOOPX_FWD);
    assert_eq!(DataSrc(perf::MEM_OP_STORE).kind(), Some(AccessKind::Write));
    assert_eq!(DataSrc(perf::MEM_OP_PFETCH).kind(), None);
}

/// Zen 4 caps: AVAIL, OPSAM, RDWROPCNT, OPCNT, BRNTRGT, OPCNTEXT, RIPINVALIDCHK, OPBRNFUSE,
/// OPDATA4, ZEN4.
const ZEN4_CAPS: u32 = 0xdfd;
/// Zen 2 caps: no ZEN4, no OPDATA4.
const ZEN2_CAPS: u32 = 0x1fd;

// `IbsOpData3`: ld_op 0, st_op 1, dc_miss 7, dc_lin_addr_valid 17, l2_miss 20,
// op_mem_width 22-25, dc_miss_lat 32-47.
fn data3(load: bool, dc_miss: bool, l2_miss: bool, width: u64, lat: u64) -> u64 {
    u64::from(load)
        | (u64::from(!load) << 1)
        | (u64::from(dc_miss) << 7)
        | (1 << 17)
        | (u64::from(l2_miss) << 20)
        | (width << 22)
        | (lat << 32)
}

// `IbsOpData2`: data_src_lo 0-2, rmt_node 4, cache_hit_st 5, data_src_hi 6-7.
fn data2(code: u64, remote: bool, owned: bool) -> u64 {
    (code & 7) | (u64::from(remote) << 4) | (u64::from(owned) << 5) | ((code >> 3) << 6)
}

fn ibs(caps: u32, data3: u64, data2: u64) -> AccessSample {
    let mut regs = IbsRegs { caps, regs: [0; 9] };
    regs.regs[IBS_OP_CTL] = (1 << 18) | 0x1000; // op_val, MaxCnt
    regs.regs[IBS_OP_DATA2] = data2;
    regs.regs[IBS_OP_DATA3] = data3;
    regs.regs[IBS_DC_LIN_AD] = 0xffff_8880_0000_1008;
    AccessSample {
        sampler: SAMPLER_KIND_IBS,
        ibs: Some(regs),
        ..AccessSample::default()
    }
}

#[test]
fn ibs_loads_from_registers() {
    // An L1 hit, 8 bytes (op_mem_width 4): no latency, the linear address from IbsDcLinAd.
    let hit = HwAccess::of(&ibs(ZEN4_CAPS, data3(true, false, false, 4, 0), 0)).expect("hw");
    assert_eq!(
        hit,
        HwAccess {
            memory_op: true,
            addr: Some(0xffff_8880_0000_1008),
            kind: Some(AccessKind::Read),
            size: Some(8),
            miss: Some(false),
            source: MemSource::L1,
            hitm: false,
            latency: None,
        }
    );
    // A miss served by DRAM (Zen 4 code 3) after 300 cycles; HW_DATA_ADDR wins.
    let mut s = ibs(
        ZEN4_CAPS,
        data3(true, true, true, 3, 300),
        data2(3, false, false),
    );
    s.hw_valid = HW_DATA_ADDR;
    s.data_addr = 0xffff_8880_0000_2000;
    let dram = HwAccess::of(&s).expect("hw");
    assert_eq!(
        (dram.addr, dram.size, dram.miss, dram.source, dram.latency),
        (
            Some(0xffff_8880_0000_2000),
            Some(4),
            Some(true),
            MemSource::Dram,
            Some(300)
        )
    );
    // dc_miss without l2_miss: L2.
    let l2 = HwAccess::of(&ibs(ZEN4_CAPS, data3(true, true, false, 4, 20), 0)).expect("hw");
    assert_eq!((l2.source, l2.latency), (MemSource::L2, Some(20)));
    // Remote DRAM, another CCX (near), another node's cache (far), the local CCX.
    for (code, remote, source) in [
        (3, true, MemSource::RemoteDram),
        (2, false, MemSource::NearCache),
        (5, false, MemSource::RemoteCache),
        (1, false, MemSource::L3),
        (7, false, MemSource::Io),
        (6, false, MemSource::OtherMemory),
    ] {
        let s = ibs(
            ZEN4_CAPS,
            data3(true, true, true, 4, 90),
            data2(code, remote, true),
        );
        assert_eq!(HwAccess::of(&s).expect("hw").source, source, "code {code}");
    }
    // Pre-Zen 4 codes: 2 is the local node's cache, 4 a remote one.
    for (code, source) in [(2, MemSource::L3), (4, MemSource::RemoteCache)] {
        let s = ibs(
            ZEN2_CAPS,
            data3(true, true, true, 4, 90),
            data2(code, false, true),
        );
        assert_eq!(HwAccess::of(&s).expect("hw").source, source, "code {code}");
    }
}

#[test]
fn ibs_hitm_prefers_the_kernels_data_src() {
    // Another CCX held the line Modified (cache_hit_st 0).
    let s = ibs(
        ZEN4_CAPS,
        data3(true, true, true, 4, 250),
        data2(2, false, false),
    );
    assert!(HwAccess::of(&s).expect("hw").hitm);
    // The kernel knew better for this CPU model: its data_src has no HITM.
    let mut quirky = s;
    quirky.hw_valid = HW_DATA_SRC;
    quirky.data_src = 0x42 | (0xb << 33) | (1 << 43);
    assert!(!HwAccess::of(&quirky).expect("hw").hitm);
    // Owned: no HITM.
    let owned = ibs(
        ZEN4_CAPS,
        data3(true, true, true, 4, 250),
        data2(2, false, true),
    );
    assert!(!HwAccess::of(&owned).expect("hw").hitm);
}

#[test]
fn ibs_stores_and_other_ops() {
    let store = HwAccess::of(&ibs(ZEN4_CAPS, data3(false, true, true, 4, 0), 0)).expect("hw");
    assert_eq!(
        (store.kind, store.miss, store.source, store.latency),
        (
            Some(AccessKind::Write),
            Some(true),
            MemSource::Unknown,
            None
        )
    );
    // Neither a load nor a store: no memory access to profile.
    let alu = HwAccess::of(&ibs(ZEN4_CAPS, 0, 0)).expect("hw");
    assert_eq!((alu.memory_op, alu.miss, alu.addr), (false, None, None));
    // An IBS record without registers falls back to the generic fields.
    let mut bare = ibs(ZEN4_CAPS, 0, 0);
    bare.ibs = None;
    bare.hw_valid = HW_DATA_ADDR | HW_DATA_SRC | HW_LATENCY;
    bare.data_addr = 0x1000;
    bare.data_src = 0x1a_0050_1042;
    bare.latency = 180;
    let g = HwAccess::of(&bare).expect("hw");
    assert_eq!(
        (g.memory_op, g.addr, g.source, g.latency),
        (true, Some(0x1000), MemSource::Dram, Some(180))
    );
}

#[test]
fn pebs_samples_use_the_generic_fields() {
    let s = AccessSample {
        sampler: SAMPLER_KIND_PEBS,
        hw_valid: HW_DATA_ADDR | HW_DATA_SRC | HW_LATENCY,
        data_addr: 0xffff_8880_0000_3000,
        data_src: 0x6_0080_0842,
        latency: 95,
        ..AccessSample::default()
    };
    assert_eq!(
        HwAccess::of(&s),
        Some(HwAccess {
            memory_op: true,
            addr: Some(0xffff_8880_0000_3000),
            kind: Some(AccessKind::Read),
            size: None,
            miss: Some(true),
            source: MemSource::L3,
            hitm: true,
            latency: Some(95),
        })
    );
    // Without HW_* bits nothing is known.
    let bare = AccessSample {
        sampler: SAMPLER_KIND_PEBS,
        data_src: 0x6_0080_0842,
        ..AccessSample::default()
    };
    let h = HwAccess::of(&bare).expect("hw");
    assert_eq!(
        (h.addr, h.miss, h.source, h.latency),
        (None, None, MemSource::Unknown, None)
    );
    let software = AccessSample {
        sampler: SAMPLER_KIND_SOFTWARE,
        ..AccessSample::default()
    };
    assert_eq!(HwAccess::of(&software), None);
}

#[test]
fn sources_have_stable_indexes_and_names() {
    for (i, s) in MemSource::ALL.iter().enumerate() {
        assert_eq!((s.index(), MemSource::from_index(i)), (i, *s));
    }
    assert_eq!(MemSource::from_index(99), MemSource::Unknown);
    assert_eq!(
        serde_json::to_string(&MemSource::RemoteDram).expect("json"),
        "\"remote_dram\""
    );
}

/// Erratum #1293 (family 0x19, models 0x0-0xF): with `dc_miss_no_mab_alloc` set, `IbsOpData2` is
/// garbage, so the source the registers name is not trusted, but only when the profile says
/// the CPU is one of those models.
#[test]
fn ibs_quirks_follow_the_profiled_cpu() {
    const ZEN3_CAPS: u32 = ZEN4_CAPS & !(1 << 11);
    const DC_MISS_NO_MAB_ALLOC: u64 = 1 << 16;
    let s = ibs(
        ZEN3_CAPS,
        data3(true, true, true, 4, 200) | DC_MISS_NO_MAB_ALLOC,
        data2(3, false, false),
    );
    let milan = dprof_ibs::CpuModel {
        family: 0x19,
        model: 0x01,
    };
    let genoa = dprof_ibs::CpuModel {
        family: 0x19,
        model: 0x11,
    };
    let source = |cpu| HwAccess::of_on(&s, cpu).expect("hw").source;
    assert_eq!(source(None), MemSource::Dram);
    assert_eq!(source(Some(genoa)), MemSource::Dram);
    assert_ne!(source(Some(milan)), MemSource::Dram);
}
