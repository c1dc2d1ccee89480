//! A synthetic profile with known answers for the miss classification and working-set views,
//! for tests and the CLI's golden files. The machine is the QEMU guest's: two CPUs, L1d
//! 64 KiB 2-way and L2 512 KiB 16-way per CPU (512 sets each), L3 16 MiB 16-way (16384 sets)
//! shared; 64-byte lines.
//!
//! | type | objects | accesses | answer |
//! |---|---|---|---|
//! | [`PAIR`] | one 64-byte object, line-aligned | a history of two counters on one line (`+0`, `+8`) written from both CPUs | 2 false-sharing and 1 true-sharing history accesses; its samples mostly false sharing |
//! | [`SMALL`] | two 32-byte objects sharing a line | a history of one of them, all on CPU 0; CPU 1 writes the other | cannot tell (never false sharing within the object) |
//! | [`PAGE`] | [`PAGE_OBJECTS`] page-aligned 4 KiB objects, touched at `+0` | samples | conflict at L1d: flagged sets `{0, 64, ..., 448}` (a 4 KiB stride reaches 8 of 512 sets), 4 lines each over 2 ways |
//! | [`SWEEP`] | [`SWEEP_OBJECTS`] consecutive 64-byte objects (128 KiB) | samples | capacity at L1d (4 lines in every set, no set flagged) |
//!
//! With one CPU ([`profile_with`]`(1, ..)`) every record is on CPU 0: no invalidation and no
//! "cannot tell".

use dprof_abi::{
    reg, Alloc, CacheInfo, Free, HistoryArm, HistoryEnd, HistoryHit, HistoryStart, Record,
    WatchRange, CACHE_NAME_BYTES, CACHE_ORIGIN_WALK, HISTORY_END_FREED,
};

use crate::profile::example::{encode_record, example_header, software_sample};
use crate::profile::{
    CacheGeometry, CpuCounters, DeviceCounters, KernelText, ProfileEncoder, StopInfo, StopReason,
};

/// Two counters on one line, written from two CPUs.
pub const PAIR: &str = "vw_pair";
/// Objects smaller than a line.
pub const SMALL: &str = "vw_small";
/// Page-aligned objects touched at one offset.
pub const PAGE: &str = "vw_page";
/// A working set larger than L1d.
pub const SWEEP: &str = "vw_sweep";

/// [`PAGE`] objects, all live at once.
pub const PAGE_OBJECTS: u64 = 32;
/// [`SWEEP`] objects, all live at once.
pub const SWEEP_OBJECTS: u64 = 2048;

/// Start of the code: `vw_alloc` (a bare `ret`, the allocation call site).
pub const VW_ALLOC: u64 = 0xffff_ffff_81b0_0000;
/// `vw_write_a`: `mov %rax,(%rdi); ret`.
pub const VW_WRITE_A: u64 = VW_ALLOC + 0x40;
/// `vw_write_b`: `mov %rax,0x8(%rdi); ret`.
pub const VW_WRITE_B: u64 = VW_ALLOC + 0x80;
/// `vw_read_a`: `mov (%rdi),%rax; ret`.
pub const VW_READ_A: u64 = VW_ALLOC + 0xc0;
/// `vw_free`: `ret`.
pub const VW_FREE: u64 = VW_ALLOC + 0x100;

const WRITE_A: [u8; 3] = [0x48, 0x89, 0x07];
const WRITE_B: [u8; 4] = [0x48, 0x89, 0x47, 0x08];
const READ_A: [u8; 3] = [0x48, 0x8b, 0x07];

/// The kallsyms snapshot.
pub const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81b00000 t vw_alloc\t[dprof_selftest]
ffffffff81b00040 t vw_write_a\t[dprof_selftest]
ffffffff81b00080 t vw_write_b\t[dprof_selftest]
ffffffff81b000c0 t vw_read_a\t[dprof_selftest]
ffffffff81b00100 t vw_free\t[dprof_selftest]
ffffffff81b00200 t vw_end\t[dprof_selftest]
";

/// Cache ids of the four types.
const CACHES: [(u64, &str, u32); 4] = [
    (0xffff_8880_0400_0100, PAIR, 64),
    (0xffff_8880_0400_0200, SMALL, 32),
    (0xffff_8880_0400_0300, PAGE, 4096),
    (0xffff_8880_0400_0400, SWEEP, 64),
];

/// The [`PAIR`] object (L1d set 1: away from the pages' sets).
pub const PAIR_OBJECT: u64 = 0xffff_8880_0a00_0040;
/// The watched [`SMALL`] object (L1d set 2); its neighbour is 32 bytes on.
pub const SMALL_OBJECT: u64 = 0xffff_8880_0a10_0080;
/// The first [`PAGE`] object (2 MiB aligned: its L1d set is 0).
pub const PAGE_BASE: u64 = 0xffff_8880_0b00_0000;
/// The first [`SWEEP`] object.
pub const SWEEP_BASE: u64 = 0xffff_8880_0c00_0000;

/// When the [`PAGE`] objects are freed (ns): they are all live from
/// `5_000 + 10 * (PAGE_OBJECTS - 1)` to here.
pub const PAGE_FREE_NS: u64 = 800_000;
/// When the [`SWEEP`] objects start to be freed (ns), one per ns.
pub const SWEEP_FREE_NS: u64 = 900_000;

/// The QEMU guest's caches as its sysfs lists them (two CPUs).
#[must_use]
pub fn guest_caches() -> Vec<CacheGeometry> {
    let cache = |level, cache_type: &str, size, ways, sets, cpus: &str| CacheGeometry {
        level,
        cache_type: cache_type.to_owned(),
        size_bytes: Some(size),
        ways: Some(ways),
        line_bytes: Some(64),
        sets: Some(sets),
        shared_cpu_list: cpus.to_owned(),
    };
    vec![
        cache(1, "Data", 64 << 10, 2, 512, "0"),
        cache(1, "Instruction", 64 << 10, 2, 512, "0"),
        cache(2, "Unified", 512 << 10, 16, 512, "0"),
        cache(3, "Unified", 16 << 20, 16, 16384, "0-1"),
        cache(1, "Data", 64 << 10, 2, 512, "1"),
        cache(1, "Instruction", 64 << 10, 2, 512, "1"),
        cache(2, "Unified", 512 << 10, 16, 512, "1"),
    ]
}

/// The code of the `vw_*` functions, `int3` between them.
#[must_use]
pub fn text() -> KernelText {
    let mut code = vec![0xccu8; 0x140];
    let mut put = |at: usize, bytes: &[u8]| code[at..at + bytes.len()].copy_from_slice(bytes);
    put(0x00, &[0xc3]);
    put(0x40, &WRITE_A);
    put(0x43, &[0xc3]);
    put(0x80, &WRITE_B);
    put(0x84, &[0xc3]);
    put(0xc0, &READ_A);
    put(0xc3, &[0xc3]);
    put(0x100, &[0xc3]);
    let mut text = KernelText::new();
    text.insert(VW_ALLOC, &code);
    text
}

fn cache_id(name: &str) -> u64 {
    CACHES.iter().find(|c| c.1 == name).map_or(0, |c| c.0)
}

fn alloc(name: &str, ptr: u64, size: u32) -> Record {
    Record::Alloc(Alloc {
        ptr,
        call_site: VW_ALLOC + 1,
        cache: cache_id(name),
        bytes_req: size,
        bytes_alloc: size,
        gfp: 0xcc0,
        node: -1,
        flags: 0,
    })
}

fn free(name: &str, ptr: u64) -> Record {
    Record::Free(Free {
        ptr,
        call_site: VW_FREE + 1,
        cache: cache_id(name),
        flags: 0,
    })
}

/// A software sample of the instruction at `ip` (`bytes`) with `%rdi` = `object`.
fn sample(ip: u64, bytes: &[u8], object: u64) -> Record {
    Record::AccessSample(software_sample(ip, bytes, &[(reg::RDI, object)], 0))
}

/// A hit trapping after the instruction at `ip` (`len` bytes) on `object`.
fn hit(history: u64, seq: u32, ip: u64, len: u64, range: u8, object: u64) -> Record {
    let mut regs = [0u64; dprof_abi::SAMPLE_REGS];
    regs[reg::RDI] = object;
    Record::HistoryHit(HistoryHit {
        history,
        ip: ip + len,
        regs,
        pid: 100,
        tid: 100,
        range,
        flags: 0,
        seq,
    })
}

fn start(history: u64, name: &str, object: u64, ranges: [WatchRange; 2]) -> Record {
    Record::HistoryStart(HistoryStart {
        history,
        object,
        cache: cache_id(name),
        call_site: VW_ALLOC + 1,
        target: 0,
        ranges,
    })
}

fn end(history: u64, object: u64, hits: u32, lifetime_ns: u64) -> Record {
    Record::HistoryEnd(HistoryEnd {
        history,
        object,
        call_site: VW_FREE + 1,
        reason: HISTORY_END_FREED,
        hits,
        dropped_hits: 0,
        lifetime_ns,
    })
}

const RANGE_A: WatchRange = WatchRange { offset: 0, len: 8 };
const RANGE_B: WatchRange = WatchRange { offset: 8, len: 8 };

/// The records as `(cpu, time, record)` in time order, for a machine of `cpus` CPUs (1 or
/// 2: with 1, everything runs on CPU 0).
#[must_use]
#[allow(clippy::too_many_lines, reason = "a table of records")]
pub fn records(cpus: u32) -> Vec<(u32, u64, Record)> {
    let second_cpu = u32::from(cpus > 1);
    let mut out: Vec<(u32, u64, Record)> = CACHES
        .iter()
        .map(|&(cache, name, size)| {
            let info = CacheInfo {
                cache,
                object_size: size,
                size,
                align: 8,
                slab_flags: 0,
                name_len: 0,
                origin: CACHE_ORIGIN_WALK,
                name: [0; CACHE_NAME_BYTES],
            }
            .with_name(name.as_bytes());
            (0, 100, Record::CacheInfo(info))
        })
        .collect();
    // The sweep: 2048 consecutive objects, allocated one per ns, freed at the end.
    for i in 0..SWEEP_OBJECTS {
        let ptr = SWEEP_BASE + i * 64;
        out.push((0, 1_000 + i, alloc(SWEEP, ptr, 64)));
        out.push((0, SWEEP_FREE_NS + i, free(SWEEP, ptr)));
    }
    // Page-aligned objects.
    for k in 0..PAGE_OBJECTS {
        let ptr = PAGE_BASE + k * 4096;
        out.push((0, 5_000 + k * 10, alloc(PAGE, ptr, 4096)));
        out.push((0, PAGE_FREE_NS + k, free(PAGE, ptr)));
        out.push((0, 100_000 + k * 100, sample(VW_READ_A, &READ_A, ptr)));
    }
    for j in 0..64 {
        let ptr = SWEEP_BASE + j * 32 * 64;
        out.push((0, 200_000 + j * 100, sample(VW_READ_A, &READ_A, ptr)));
    }
    // The pair: counter a at +0, b at +8, one history watching both.
    let p = PAIR_OBJECT;
    out.extend([
        (0, 10_000, alloc(PAIR, p, 64)),
        (0, 10_000, start(1, PAIR, p, [RANGE_A, RANGE_B])),
        (
            second_cpu,
            10_050,
            Record::HistoryArm(HistoryArm {
                history: 1,
                delay_ns: 50,
            }),
        ),
        // 1: no write before.
        (0, 10_100, hit(1, 0, VW_WRITE_A, 3, 0, p)),
        (0, 10_150, sample(VW_WRITE_A, &WRITE_A, p)),
        // 2: false sharing: CPU 0 wrote a, CPU 1 writes b.
        (second_cpu, 10_200, hit(1, 1, VW_WRITE_B, 4, 1, p)),
        (second_cpu, 10_250, sample(VW_WRITE_B, &WRITE_B, p)),
        (second_cpu, 10_260, sample(VW_WRITE_B, &WRITE_B, p)),
        // 3: false sharing: CPU 1 wrote b, CPU 0 reads a.
        (0, 10_300, hit(1, 2, VW_READ_A, 3, 0, p)),
        // 4: CPU 1 wrote the line last itself.
        (second_cpu, 10_400, hit(1, 3, VW_READ_A, 3, 0, p)),
        (0, 10_450, sample(VW_READ_A, &READ_A, p)),
        // 5: the same CPU again.
        (second_cpu, 10_500, hit(1, 4, VW_WRITE_A, 3, 0, p)),
        // 6: true sharing: CPU 1 wrote a, CPU 0 reads a.
        (0, 10_600, hit(1, 5, VW_READ_A, 3, 0, p)),
        (second_cpu, 20_000, free(PAIR, p)),
        (second_cpu, 20_000, end(1, p, 6, 10_000)),
    ]);
    // Two 32-byte objects on one line: the history of the first sees only CPU 0, while CPU 1
    // writes the second.
    let (s1, s2) = (SMALL_OBJECT, SMALL_OBJECT + 32);
    out.extend([
        (0, 30_000, alloc(SMALL, s1, 32)),
        (
            0,
            30_000,
            start(2, SMALL, s1, [RANGE_A, WatchRange::default()]),
        ),
        (second_cpu, 30_000, alloc(SMALL, s2, 32)),
        (0, 30_100, hit(2, 0, VW_WRITE_A, 3, 0, s1)),
        (0, 30_150, sample(VW_WRITE_A, &WRITE_A, s1)),
        (second_cpu, 30_200, sample(VW_WRITE_A, &WRITE_A, s2)),
        (0, 30_300, hit(2, 1, VW_READ_A, 3, 0, s1)),
        (0, 40_000, free(SMALL, s1)),
        (0, 40_000, end(2, s1, 2, 10_000)),
        (second_cpu, 40_000, free(SMALL, s2)),
    ]);
    out.sort_by_key(|(_, t, _)| *t);
    out
}

/// The profile on the guest's two CPUs and caches.
#[must_use]
pub fn profile() -> Vec<u8> {
    profile_with(2, guest_caches())
}

/// The profile on `cpus` CPUs (1 or 2) with these caches in its header.
#[must_use]
pub fn profile_with(cpus: u32, caches: Vec<CacheGeometry>) -> Vec<u8> {
    let mut records = records(cpus);
    // Per-CPU rings drain one after the other.
    records.sort_by_key(|(cpu, t, _)| (*cpu, *t));
    let bytes: Vec<u8> = records
        .iter()
        .flat_map(|(cpu, t, r)| encode_record(*cpu, *t, r))
        .collect();
    let mut header = example_header();
    header.online_cpus = cpus;
    header.module.nr_cpu_ids = cpus;
    header.module.online_cpus = cpus;
    header.caches = caches;
    header.config.events.push("histories".to_owned());
    let stop = StopInfo {
        reason: StopReason::CommandExited { status: 0 },
        ended_unix_s: 1_700_000_001,
        elapsed_ns: SWEEP_FREE_NS + SWEEP_OBJECTS,
        device: Some(DeviceCounters {
            records_written: records.len() as u64,
            records_lost: 0,
            bytes_read: bytes.len() as u64,
            cpus: vec![
                CpuCounters {
                    records_written: 0,
                    records_lost: 0,
                };
                cpus as usize
            ],
            histories: None,
        }),
    };
    let result = (|| {
        let mut enc = ProfileEncoder::new(Vec::new(), &header, KALLSYMS.as_bytes(), b"")?;
        enc.records(&bytes)?;
        enc.finish_with_text(&stop, &text())
    })();
    // Writing to a Vec cannot fail and the records are valid; an empty Vec would make every
    // test using it fail loudly.
    result.unwrap_or_default()
}
