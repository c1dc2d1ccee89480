//! A small synthetic profile with every record kind, for tests, fuzz seeds and documentation.

use dprof_abi::{
    reg, AccessSample, Alloc, CacheInfo, Free, Lost, Record, ALLOC_KMALLOC, CACHE_NAME_BYTES,
    CACHE_ORIGIN_SEEN, CACHE_ORIGIN_WALK, FREE_KFREE, SAMPLER_KIND_SOFTWARE, SAMPLE_INSN_BYTES,
    SAMPLE_USER,
};

use super::{
    CacheGeometry, CollectConfig, CpuCounters, DeviceCounters, ModuleInfo, ProfileEncoder,
    ProfileHeader, SamplingConfig, StopInfo, StopReason, Target,
};

/// Encodes one whole record (header and payload) as the module writes it.
#[must_use]
pub fn encode_record(cpu: u32, time_ns: u64, record: &Record) -> Vec<u8> {
    let mut buf = [0u8; dprof_abi::MAX_RECORD_SIZE];
    let size = record.encode(cpu, time_ns, &mut buf);
    buf[..size].to_vec()
}

/// A software access sample at `ip` executing `insn` (at most [`SAMPLE_INSN_BYTES`] bytes),
/// with `regs` set as given (register number, value) and the rest zero.
#[must_use]
pub fn software_sample(ip: u64, insn: &[u8], regs: &[(usize, u64)], gs_base: u64) -> AccessSample {
    let mut sample = AccessSample {
        ip,
        gs_base,
        sampler: SAMPLER_KIND_SOFTWARE,
        ..AccessSample::default()
    };
    let len = insn.len().min(SAMPLE_INSN_BYTES);
    sample.insn[..len].copy_from_slice(&insn[..len]);
    sample.insn_len = len as u8;
    for &(r, v) in regs {
        if let Some(slot) = sample.regs.get_mut(r) {
            *slot = v;
        }
    }
    sample
}

/// The per-CPU area base of [`example_profile`]'s samples (%gs base of CPU 1).
pub const EXAMPLE_GS_BASE: u64 = 0xffff_8880_7fc8_0000;

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
        cpu_id: None,
        proc_version: Some(EXAMPLE_PROC_VERSION.to_owned()),
        build_id: Some("0123456789abcdef0123456789abcdef01234567".to_owned()),
        online_cpus: 4,
        caches: vec![
            cache(1, "Data", 32 * 1024, 8, 64, "0"),
            cache(1, "Instruction", 32 * 1024, 8, 64, "0"),
            cache(2, "Unified", 1024 * 1024, 16, 1024, "0-1"),
            cache(3, "Unified", 16 * 1024 * 1024, 16, 16384, "0-3"),
        ],
        slab_merging: false,
        config: CollectConfig {
            events: vec!["slab".to_owned(), "samples".to_owned()],
            ring_bytes: dprof_abi::DEFAULT_RING_BYTES,
            target: Target::Command {
                argv: vec!["sh".to_owned(), "-c".to_owned(), "true".to_owned()],
            },
            sampling: Some(SamplingConfig {
                sampler: "software".to_owned(),
                period_ns: dprof_abi::DEFAULT_SAMPLE_PERIOD_NS,
                user: true,
                period_events: None,
                pmu: None,
            }),
            histories: None,
            causal: None,
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

/// The `/proc/version` of [`example_header`].
pub const EXAMPLE_PROC_VERSION: &str =
    "Linux version 6.12.0-dprof (build@host) (gcc (Debian 14.2.0-19) 14.2.0) #1 SMP";

/// The kallsyms snapshot of [`example_profile`]: code, data, per-CPU (0-based) and module
/// symbols.
pub const EXAMPLE_KALLSYMS: &str = "\
0000000000000000 A __per_cpu_start
0000000000001000 D pcpu_hot
0000000000001040 D runqueues
0000000000002000 A __per_cpu_end
ffffffff81000000 T _stext
ffffffff81200000 T __alloc_skb
ffffffff81200400 T kfree_skbmem
ffffffff81300000 T kmalloc_reserve
ffffffff81310000 t dup_task_struct
ffffffff82000000 D init_task
ffffffff82003000 d jiffies_lock
ffffffff82100000 B jiffies
ffffffffc0000000 t dprof_selftest_work\t[dprof_selftest]
ffffffffc0002000 d selftest_counters\t[dprof_selftest]
";

/// The modules snapshot of [`example_profile`].
pub const EXAMPLE_MODULES: &str =
    "dprof 65536 0 - Live 0xffffffffc0100000 (O)\ndprof_selftest 16384 0 - Live 0xffffffffc0000000 (O)\n";

/// A small complete profile: two Records sections holding cache infos (one of them with a
/// name longer than the ABI keeps), allocations and frees through both tracepoints, a large
/// kmalloc with no cache, records lost on CPU 1, and software access samples: a load from an
/// `sk_buff`, a %gs-relative (per-CPU) load, and a user-mode sample.
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
    let sample = |s: AccessSample| Record::AccessSample(s);
    let second: [(u32, u64, Record); 8] = [
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
        (
            1,
            6_100,
            // mov 0x10(%rdi),%rax in __alloc_skb, %rdi pointing at the first sk_buff.
            sample(AccessSample {
                pid: 1000,
                tid: 1001,
                ..software_sample(
                    0xffff_ffff_8120_0060,
                    &[0x48, 0x8b, 0x47, 0x10],
                    &[(reg::RDI, 0xffff_8880_0401_0000), (reg::RAX, 1)],
                    EXAMPLE_GS_BASE,
                )
            }),
        ),
        (
            1,
            6_200,
            // mov %gs:0x1040,%rax in kfree_skbmem: runqueues, CPU 1's copy.
            sample(software_sample(
                0xffff_ffff_8120_0420,
                &[0x65, 0x48, 0x8b, 0x04, 0x25, 0x40, 0x10, 0x00, 0x00],
                &[],
                EXAMPLE_GS_BASE,
            )),
        ),
        (
            3,
            6_300,
            // A user-mode sample: mov (%rdi),%eax in a program.
            sample(AccessSample {
                pid: 1234,
                tid: 1234,
                flags: SAMPLE_USER,
                ..software_sample(0x40_1000, &[0x8b, 0x07], &[(reg::RDI, 0x7ffd_0000)], 0)
            }),
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
        elapsed_ns: 5_300,
        device: Some(DeviceCounters {
            records_written: 14,
            records_lost: 7,
            bytes_read: 0,
            cpus: vec![
                CpuCounters {
                    records_written: 3,
                    records_lost: 0,
                },
                CpuCounters {
                    records_written: 4,
                    records_lost: 7,
                },
                CpuCounters {
                    records_written: 3,
                    records_lost: 0,
                },
                CpuCounters {
                    records_written: 3,
                    records_lost: 0,
                },
            ],
            histories: None,
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
