//! A synthetic profile with object access histories and known answers, for tests and the
//! CLI's golden files.
//!
//! One cache, `st_obj`, whose objects go `st_alloc` → `st_producer` → `st_consumer` →
//! `st_free`, the way the selftest module's producer hands objects to a consumer on another
//! CPU. The functions' code is hand-assembled into the profile's Text section (except
//! `st_untraced`'s), so hits are found and checked the way real ones are:
//!
//! | history | object | ranges | path | what it shows |
//! |---|---|---|---|---|
//! | 1 | [`OBJ1`] | `+0x10/8`, `+0x18/4` | consumer on CPU 1 | the common path, a clobbered base |
//! | 2 | [`OBJ2`] | same | same as 1 | path frequency 2; a hit timed after the end is dropped |
//! | 3 | [`OBJ3`] | same | all on CPU 0, through `st_untraced` | a mismatch, a hit with no code |
//! | 4 | [`OBJ4`] | `+0x10/8` | cut by the timeout | left out of paths |
//!
//! Two software access samples land on `st_obj` at instructions the paths name.

use dprof_abi::{
    reg, Alloc, CacheInfo, Free, HistoryArm, HistoryEnd, HistoryHit, HistoryStart, Record,
    WatchRange, CACHE_NAME_BYTES, CACHE_ORIGIN_WALK, HISTORY_END_FREED, HISTORY_END_TIMEOUT,
};

use crate::profile::example::{encode_record, example_header, software_sample};
use crate::profile::{
    CpuCounters, DeviceCounters, KernelText, ProfileEncoder, StopInfo, StopReason,
};

/// `st_alloc`: `push %rbp; mov %rsp,%rbp; mov %rax,0x10(%rdi); pop %rbp; ret`.
pub const ST_ALLOC: u64 = 0xffff_ffff_81a0_0000;
/// `st_producer`: `push %rbp; mov %rsp,%rbp; mov %rax,0x10(%rdi); mov 0x18(%rdi),%ecx;
/// pop %rbp; ret`.
pub const ST_PRODUCER: u64 = ST_ALLOC + 0x40;
/// `st_consumer`: `push %rbp; mov 0x10(%rdi),%rax; mov 0x18(%rdi),%rdi; pop %rbp; ret`.
pub const ST_CONSUMER: u64 = ST_ALLOC + 0x80;
/// `st_free`: `lock incl 0x10(%rdi); ret`.
pub const ST_FREE: u64 = ST_ALLOC + 0xc0;
/// A function whose code the profile lacks.
pub const ST_UNTRACED: u64 = ST_ALLOC + 0x100;

/// The kallsyms snapshot.
pub const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81a00000 t st_alloc\t[dprof_selftest]
ffffffff81a00040 t st_producer\t[dprof_selftest]
ffffffff81a00080 t st_consumer\t[dprof_selftest]
ffffffff81a000c0 t st_free\t[dprof_selftest]
ffffffff81a00100 t st_untraced\t[dprof_selftest]
ffffffff81a00200 t st_end\t[dprof_selftest]
";

/// The `st_obj` cache.
pub const ST_CACHE: u64 = 0xffff_8880_0300_0400;
/// The type name of its objects.
pub const ST_TYPE: &str = "st_obj";
/// Objects of histories 1 to 4.
pub const OBJ1: u64 = 0xffff_8880_0a00_0000;
/// History 2's object.
pub const OBJ2: u64 = OBJ1 + 0x40;
/// History 3's object.
pub const OBJ3: u64 = OBJ1 + 0x80;
/// History 4's object.
pub const OBJ4: u64 = OBJ1 + 0xc0;

/// Start times of histories 1 to 4.
pub const STARTS: [u64; 4] = [10_000, 20_000, 30_000, 40_000];

/// The code of the `st_*` functions, padded with `int3` between them.
#[must_use]
pub fn text() -> KernelText {
    let mut code = vec![0xccu8; 0x100];
    let mut put = |at: usize, bytes: &[u8]| code[at..at + bytes.len()].copy_from_slice(bytes);
    put(
        0x00,
        &[
            0x55, // +0 push %rbp
            0x48, 0x89, 0xe5, // +1 mov %rsp,%rbp
            0x48, 0x89, 0x47, 0x10, // +4 mov %rax,0x10(%rdi): 8-byte write
            0x5d, // +8 pop %rbp
            0xc3, // +9 ret
        ],
    );
    put(
        0x40,
        &[
            0x55, // +0 push %rbp
            0x48, 0x89, 0xe5, // +1 mov %rsp,%rbp
            0x48, 0x89, 0x47, 0x10, // +4 mov %rax,0x10(%rdi): 8-byte write
            0x8b, 0x4f, 0x18, // +8 mov 0x18(%rdi),%ecx: 4-byte read
            0x5d, // +0xb pop %rbp
            0xc3, // +0xc ret
        ],
    );
    put(
        0x80,
        &[
            0x55, // +0 push %rbp
            0x48, 0x8b, 0x47, 0x10, // +1 mov 0x10(%rdi),%rax: 8-byte read
            0x48, 0x8b, 0x7f, 0x18, // +5 mov 0x18(%rdi),%rdi: read, overwrites its base
            0x5d, // +9 pop %rbp
            0xc3, // +0xa ret
        ],
    );
    put(
        0xc0,
        &[
            0xf0, 0xff, 0x47, 0x10, // +0 lock incl 0x10(%rdi): read-modify-write
            0xc3, // +4 ret
        ],
    );
    let mut text = KernelText::new();
    text.insert(ST_ALLOC, &code);
    text
}

/// The ranges of pairwise histories: `+0x10/8` and `+0x18/4`.
pub const PAIR: [WatchRange; 2] = [
    WatchRange {
        offset: 0x10,
        len: 8,
    },
    WatchRange {
        offset: 0x18,
        len: 4,
    },
];

fn hit(history: u64, seq: u32, trap_ip: u64, range: u8, rdi: u64) -> Record {
    let mut regs = [0u64; dprof_abi::SAMPLE_REGS];
    regs[reg::RDI] = rdi;
    regs[reg::RSP] = 0xffff_c900_0001_3e00;
    Record::HistoryHit(HistoryHit {
        history,
        ip: trap_ip,
        regs,
        pid: 100,
        tid: 100 + u32::from(range),
        range,
        flags: 0,
        seq,
    })
}

fn start(history: u64, object: u64, ranges: [WatchRange; 2]) -> Record {
    Record::HistoryStart(HistoryStart {
        history,
        object,
        cache: ST_CACHE,
        call_site: ST_ALLOC + 9,
        target: 0,
        ranges,
    })
}

fn end(history: u64, object: u64, reason: u32, hits: u32, lifetime_ns: u64) -> Record {
    Record::HistoryEnd(HistoryEnd {
        history,
        object,
        call_site: if reason == HISTORY_END_FREED {
            ST_FREE + 4
        } else {
            0
        },
        reason,
        hits,
        dropped_hits: 0,
        lifetime_ns,
    })
}

fn alloc(ptr: u64) -> Record {
    Record::Alloc(Alloc {
        ptr,
        call_site: ST_ALLOC + 9,
        cache: ST_CACHE,
        bytes_req: 64,
        bytes_alloc: 64,
        gfp: 0xcc0,
        node: -1,
        flags: 0,
    })
}

fn free(ptr: u64) -> Record {
    Record::Free(Free {
        ptr,
        call_site: ST_FREE + 4,
        cache: ST_CACHE,
        flags: 0,
    })
}

/// The records as `(cpu, time, record)`, in time order.
#[must_use]
#[allow(clippy::too_many_lines, reason = "a table of records")]
pub fn records() -> Vec<(u32, u64, Record)> {
    let [t1, t2, t3, t4] = STARTS;
    let mut out = vec![(
        0,
        100,
        Record::CacheInfo(
            CacheInfo {
                cache: ST_CACHE,
                object_size: 64,
                size: 64,
                align: 8,
                slab_flags: 0,
                name_len: 0,
                origin: CACHE_ORIGIN_WALK,
                name: [0; CACHE_NAME_BYTES],
            }
            .with_name(ST_TYPE.as_bytes()),
        ),
    )];
    // Histories 1 and 2: produced on CPU 0, consumed and freed on CPU 1.
    for (history, t, obj) in [(1u64, t1, OBJ1), (2, t2, OBJ2)] {
        out.extend([
            (0, t, alloc(obj)),
            (0, t, start(history, obj, PAIR)),
            (
                1,
                t + 300,
                Record::HistoryArm(HistoryArm {
                    history,
                    delay_ns: 300,
                }),
            ),
            (
                2,
                t + 350,
                Record::HistoryArm(HistoryArm {
                    history,
                    delay_ns: 350,
                }),
            ),
            (0, t + 100, hit(history, 0, ST_ALLOC + 8, 0, obj)),
            (0, t + 200, hit(history, 1, ST_PRODUCER + 8, 0, obj)),
            (0, t + 300, hit(history, 2, ST_PRODUCER + 0xb, 1, obj)),
            (1, t + 1000, hit(history, 3, ST_CONSUMER + 5, 0, obj)),
            // mov 0x18(%rdi),%rdi: %rdi now holds what it loaded.
            (1, t + 1100, hit(history, 4, ST_CONSUMER + 9, 1, 0x1234)),
            (1, t + 1200, hit(history, 5, ST_FREE + 4, 0, obj)),
            (1, t + 1300, free(obj)),
            (1, t + 1300, end(history, obj, HISTORY_END_FREED, 6, 1300)),
        ]);
    }
    // Timed after history 2's end (a CPU slow to stop watching): dropped.
    out.push((2, t2 + 1400, hit(2, 6, ST_CONSUMER + 5, 0, OBJ2)));
    // Samples: the producer's store and the consumer's load of +0x10 in history 1's object.
    out.push((
        0,
        t1 + 150,
        Record::AccessSample(software_sample(
            ST_PRODUCER + 4,
            &[0x48, 0x89, 0x47, 0x10],
            &[(reg::RDI, OBJ1)],
            0,
        )),
    ));
    out.push((
        1,
        t1 + 1050,
        Record::AccessSample(software_sample(
            ST_CONSUMER + 1,
            &[0x48, 0x8b, 0x47, 0x10],
            &[(reg::RDI, OBJ1)],
            0,
        )),
    ));
    // History 3: everything on CPU 0, through a function with no code in the profile, and a
    // hit whose registers point elsewhere (a mismatch).
    out.extend([
        (0, t3, alloc(OBJ3)),
        (0, t3, start(3, OBJ3, PAIR)),
        (0, t3 + 100, hit(3, 0, ST_ALLOC + 8, 0, OBJ3)),
        (0, t3 + 200, hit(3, 1, ST_PRODUCER + 8, 0, OBJ3 + 0x100)),
        (0, t3 + 300, hit(3, 2, ST_PRODUCER + 0xb, 1, OBJ3)),
        (0, t3 + 400, hit(3, 3, ST_UNTRACED + 0x10, 0, OBJ3)),
        (0, t3 + 500, hit(3, 4, ST_CONSUMER + 5, 0, OBJ3)),
        (0, t3 + 600, hit(3, 5, ST_FREE + 4, 0, OBJ3)),
        (0, t3 + 700, free(OBJ3)),
        (0, t3 + 700, end(3, OBJ3, HISTORY_END_FREED, 6, 700)),
    ]);
    // History 4: one range, cut by the timeout.
    out.extend([
        (0, t4, alloc(OBJ4)),
        (0, t4, start(4, OBJ4, [PAIR[0], WatchRange::default()])),
        (0, t4 + 100, hit(4, 0, ST_PRODUCER + 8, 0, OBJ4)),
        (0, t4 + 5000, end(4, OBJ4, HISTORY_END_TIMEOUT, 1, 5000)),
    ]);
    out.sort_by_key(|(_, t, _)| *t);
    out
}

/// The profile: records in the order per-CPU rings drain (all of CPU 0's, then CPU 1's, ...),
/// so hits on CPU 1 follow their history's start and, for history 2, its end on another ring.
#[must_use]
pub fn profile() -> Vec<u8> {
    let mut records = records();
    records.sort_by_key(|(cpu, t, _)| (*cpu, *t));
    let bytes: Vec<u8> = records
        .iter()
        .flat_map(|(cpu, t, r)| encode_record(*cpu, *t, r))
        .collect();
    let mut header = example_header();
    header.config.events.push("histories".to_owned());
    let stop = StopInfo {
        reason: StopReason::CommandExited { status: 0 },
        ended_unix_s: 1_700_000_001,
        elapsed_ns: 50_000,
        device: Some(DeviceCounters {
            records_written: records.len() as u64,
            records_lost: 0,
            bytes_read: bytes.len() as u64,
            cpus: vec![
                CpuCounters {
                    records_written: 0,
                    records_lost: 0,
                };
                header.module.nr_cpu_ids as usize
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
