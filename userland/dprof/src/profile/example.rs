//! A small synthetic profile with every record kind, for tests, fuzz seeds and documentation.

use dprof_abi::{
    Alloc, CacheInfo, Free, Lost, Record, RecordHeader, ALLOC_KMALLOC, CACHE_NAME_BYTES,
    CACHE_ORIGIN_SEEN, CACHE_ORIGIN_WALK, FREE_KFREE, RECORD_HEADER_SIZE,
};

use super::{
    CacheGeometry, CollectConfig, CpuCounters, DeviceCounters, ModuleInfo, ProfileEncoder,
    ProfileHeader, StopInfo, StopReason, Target,
};

/// Encodes one whole record (header and payload) as the module writes it.
#[must_use]
pub fn encode_record(cpu: u32, time_ns: u64, record: &Record) -> Vec<u8> {
    let kind = record.kind();
    let size = kind.record_size();
    let mut out = vec![0u8; size];
    let mut header = [0u8; RECORD_HEADER_SIZE];
    RecordHeader {
        kind: kind as u16,
        // Record sizes are far below u16::MAX (asserted in dprof-abi).
        size: size as u16,
        cpu,
        time_ns,
    }
    .encode(&mut header);
    out[..RECORD_HEADER_SIZE].copy_from_slice(&header);
    let payload = &mut out[RECORD_HEADER_SIZE..];
    match record {
        Record::Alloc(a) => {
            let mut p = [0u8; Alloc::SIZE];
            a.encode(&mut p);
            payload.copy_from_slice(&p);
        }
        Record::Free(f) => {
            let mut p = [0u8; Free::SIZE];
            f.encode(&mut p);
            payload.copy_from_slice(&p);
        }
        Record::CacheInfo(c) => {
            let mut p = [0u8; CacheInfo::SIZE];
            c.encode(&mut p);
            payload.copy_from_slice(&p);
        }
        Record::Lost(l) => {
            let mut p = [0u8; Lost::SIZE];
            l.encode(&mut p);
            payload.copy_from_slice(&p);
        }
    }
    out
}

/// The header of [`example_profile`]: a 4-CPU machine with fixed values throughout.
#[must_use]
pub fn example_header() -> ProfileHeader {
    let cache = |level, cache_type: &str, size, ways, sets, cpus: &str| CacheGeometry {
        level,
        cache_type: cache_type.to_owned(),
        size_bytes: Some(size),
        ways: Some(ways),
        line_bytes: Some(64),
        sets: Some(sets),
        shared_cpu_list: cpus.to_owned(),
    };
    ProfileHeader {
        dprof_version: "0.1.0".to_owned(),
        created_unix_s: 1_700_000_000,
        kernel_release: "6.12.0-dprof".to_owned(),
        cmdline: "console=ttyS0 slab_nomerge".to_owned(),
        cpu_model: "QEMU Virtual CPU version 2.5+".to_owned(),
        online_cpus: 4,
        caches: vec![
            cache(1, "Data", 32 * 1024, 8, 64, "0"),
            cache(1, "Instruction", 32 * 1024, 8, 64, "0"),
            cache(2, "Unified", 1024 * 1024, 16, 1024, "0-1"),
            cache(3, "Unified", 16 * 1024 * 1024, 16, 16384, "0-3"),
        ],
        slab_merging: false,
        config: CollectConfig {
            events: vec!["slab".to_owned()],
            ring_bytes: dprof_abi::DEFAULT_RING_BYTES,
            target: Target::Command {
                argv: vec!["sh".to_owned(), "-c".to_owned(), "true".to_owned()],
            },
        },
        module: ModuleInfo {
            abi_version: dprof_abi::ABI_VERSION,
            nr_cpu_ids: 4,
            online_cpus: 4,
            samplers: dprof_abi::SAMPLER_SOFTWARE,
            features: dprof_abi::FEATURE_SLAB_EVENTS | dprof_abi::FEATURE_CACHE_WALK,
            min_ring_bytes: dprof_abi::MIN_RING_BYTES,
            max_ring_bytes: dprof_abi::MAX_RING_BYTES,
            max_record_size: dprof_abi::MAX_RECORD_SIZE as u32,
        },
    }
}

/// The kallsyms snapshot of [`example_profile`].
pub const EXAMPLE_KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81200000 T __alloc_skb
ffffffff81200400 T kfree_skbmem
ffffffff81300000 T kmalloc_reserve
ffffffff81310000 t dup_task_struct
ffffffffc0000000 t dprof_selftest_work\t[dprof_selftest]
";

/// The modules snapshot of [`example_profile`].
pub const EXAMPLE_MODULES: &str =
    "dprof 65536 0 - Live 0xffffffffc0100000 (O)\ndprof_selftest 16384 0 - Live 0xffffffffc0000000 (O)\n";

/// A small complete profile: two Records sections holding cache infos (one of them with a
/// name longer than the ABI keeps), allocations and frees through both tracepoints, a large
/// kmalloc with no cache, and records lost on CPU 1.
#[must_use]
#[allow(clippy::too_many_lines, reason = "a table of records")]
pub fn example_profile() -> Vec<u8> {
    const SKB: u64 = 0xffff_8880_0300_0000;
    const KMALLOC_1K: u64 = 0xffff_8880_0300_1000;
    const LONG: u64 = 0xffff_8880_0300_2000;
    let info = |cache, object_size, size, name: &[u8], origin| {
        Record::CacheInfo(
            CacheInfo {
                cache,
                object_size,
                size,
                align: 8,
                slab_flags: 0x0004_0000,
                name_len: 0,
                origin,
                name: [0; CACHE_NAME_BYTES],
            }
            .with_name(name),
        )
    };
    let alloc = |ptr, call_site, cache, req, got, flags| {
        Record::Alloc(Alloc {
            ptr,
            call_site,
            cache,
            bytes_req: req,
            bytes_alloc: got,
            gfp: 0xcc0,
            node: -1,
            flags,
        })
    };
    let free = |ptr, call_site, cache, flags| {
        Record::Free(Free {
            ptr,
            call_site,
            cache,
            flags,
        })
    };
    let first: [(u32, u64, Record); 6] = [
        (
            0,
            1_000,
            info(SKB, 232, 256, b"skbuff_head_cache", CACHE_ORIGIN_WALK),
        ),
        (
            0,
            1_010,
            info(KMALLOC_1K, 1024, 1024, b"kmalloc-1k", CACHE_ORIGIN_WALK),
        ),
        (
            1,
            2_000,
            alloc(
                0xffff_8880_0401_0000,
                0xffff_ffff_8120_0042,
                SKB,
                232,
                256,
                0,
            ),
        ),
        (
            2,
            2_500,
            alloc(
                0xffff_8880_0402_0400,
                0xffff_ffff_8130_0010,
                KMALLOC_1K,
                700,
                1024,
                ALLOC_KMALLOC,
            ),
        ),
        (
            2,
            2_600,
            alloc(
                0xffff_8880_0500_0000,
                0xffff_ffff_8130_0010,
                0,
                16384,
                16384,
                ALLOC_KMALLOC,
            ),
        ),
        (
            1,
            3_000,
            free(0xffff_8880_0401_0000, 0xffff_ffff_8120_0410, SKB, 0),
        ),
    ];
    let second: [(u32, u64, Record); 5] = [
        (
            3,
            3_500,
            info(
                LONG,
                96,
                96,
                b"a_cache_with_a_name_longer_than_the_abi_keeps_in_its_record",
                CACHE_ORIGIN_SEEN,
            ),
        ),
        (
            3,
            3_600,
            alloc(
                0xffff_8880_0403_0060,
                0xffff_ffff_c000_0020,
                LONG,
                96,
                96,
                0,
            ),
        ),
        (1, 4_000, Record::Lost(Lost { count: 7 })),
        (
            2,
            5_000,
            free(
                0xffff_8880_0402_0400,
                0xffff_ffff_8100_0000,
                KMALLOC_1K,
                FREE_KFREE,
            ),
        ),
        (
            0,
            6_000,
            alloc(
                0xffff_8880_0401_0100,
                0xffff_ffff_dead_0000,
                SKB,
                232,
                256,
                0,
            ),
        ),
    ];
    let chunk = |records: &[(u32, u64, Record)]| -> Vec<u8> {
        records
            .iter()
            .flat_map(|(cpu, t, r)| encode_record(*cpu, *t, r))
            .collect()
    };
    let stop = StopInfo {
        reason: StopReason::CommandExited { status: 0 },
        ended_unix_s: 1_700_000_001,
        elapsed_ns: 5_000,
        device: Some(DeviceCounters {
            records_written: 11,
            records_lost: 7,
            bytes_read: 0,
            cpus: vec![
                CpuCounters {
                    records_written: 3,
                    records_lost: 0,
                },
                CpuCounters {
                    records_written: 2,
                    records_lost: 7,
                },
                CpuCounters {
                    records_written: 3,
                    records_lost: 0,
                },
                CpuCounters {
                    records_written: 2,
                    records_lost: 0,
                },
            ],
        }),
    };
    let first = chunk(&first);
    let second = chunk(&second);
    let bytes_read = (first.len() + second.len()) as u64;
    let stop = StopInfo {
        device: stop.device.map(|d| DeviceCounters { bytes_read, ..d }),
        ..stop
    };
    let result = (|| {
        let mut enc = ProfileEncoder::new(
            Vec::new(),
            &example_header(),
            EXAMPLE_KALLSYMS.as_bytes(),
            EXAMPLE_MODULES.as_bytes(),
        )?;
        enc.records(&first)?;
        enc.records(&second)?;
        enc.finish(&stop)
    })();
    // Writing to a Vec cannot fail and the records above are valid; an empty Vec would
    // make every test using it fail loudly.
    result.unwrap_or_default()
}
