//! A synthetic profile with known answers for the data profile: slab objects of three types,
//! a generic kmalloc cache used from two sites, a large kmalloc, a global, per-CPU accesses
//! (`%gs`-relative and through a pointer into another CPU's area), a stack access, objects
//! touched from two CPUs (bounce) and from one, an address reused after a free, records out of
//! time order in the file, and samples of every unresolved kind.
//!
//! Samples carry real instruction bytes and registers, so the decoder computes their
//! addresses the way it does for a real profile. The expected answers are in the module's
//! tests and in the CLI's golden files.

use dprof_abi::{
    reg, AccessSample, Alloc, CacheInfo, Free, Record, ALLOC_KMALLOC, CACHE_NAME_BYTES,
    CACHE_ORIGIN_WALK, FREE_KFREE, SAMPLE_USER,
};

use crate::profile::example::{encode_record, example_header, software_sample};
use crate::profile::{
    CpuCounters, DeviceCounters, ProfileEncoder, ProfileHeader, StopInfo, StopReason,
};

/// The kallsyms snapshot: 0-based per-CPU area, functions, globals.
pub const KALLSYMS: &str = "\
0000000000000000 A __per_cpu_start
0000000000001000 D pcpu_hot
0000000000001040 D runqueues
0000000000002000 A __per_cpu_end
ffffffff81000000 T _stext
ffffffff81100000 T tcp_sendmsg
ffffffff81101000 T tcp_recvmsg
ffffffff81200000 T __alloc_skb
ffffffff81201000 T skb_release_data
ffffffff81310000 t dup_task_struct
ffffffff81320000 T schedule
ffffffff81400000 T alloc_pipe_info
ffffffff81401000 T free_pipe_info
ffffffff81500000 T do_sys_poll
ffffffff81600000 T alloc_empty_file
ffffffff82000000 D init_task
ffffffff82100000 B jiffies
ffffffff82100040 b jiffies_seq
";

/// Cache identifiers.
pub const SKB_CACHE: u64 = 0xffff_8880_0300_0000;
/// `task_struct` cache.
pub const TASK_CACHE: u64 = 0xffff_8880_0300_0100;
/// `filp` cache.
pub const FILP_CACHE: u64 = 0xffff_8880_0300_0200;
/// `kmalloc-1k` cache.
pub const KMALLOC_1K: u64 = 0xffff_8880_0300_0300;

/// An `sk_buff` touched from CPUs 0 and 1.
pub const SKB_A: u64 = 0xffff_8880_0401_0000;
/// An `sk_buff` touched from CPUs 0 and 1, freed, and its address reused for one touched from
/// CPU 1 only.
pub const SKB_B: u64 = 0xffff_8880_0401_0100;
/// A `task_struct` touched from CPU 2 only.
pub const TASK: u64 = 0xffff_8880_0500_0000;
/// A `file` no sample touches.
pub const FILP: u64 = 0xffff_8880_0600_0000;
/// A kmalloc-1k buffer from `__alloc_skb`.
pub const KM_SKB: u64 = 0xffff_8880_0700_0000;
/// A kmalloc-1k buffer from `alloc_pipe_info`.
pub const KM_PIPE: u64 = 0xffff_8880_0700_0400;
/// A large kmalloc from `do_sys_poll`.
pub const LARGE: u64 = 0xffff_8880_0800_0000;
/// An address nothing was allocated at.
pub const UNKNOWN: u64 = 0xffff_8880_0900_0000;
/// `%rsp` of kernel samples.
pub const RSP: u64 = 0xffff_c900_0001_3e80;
/// `jiffies`.
pub const JIFFIES: u64 = 0xffff_ffff_8210_0000;

/// `%gs` base (per-CPU area) of `cpu`.
#[must_use]
pub const fn gs_base(cpu: u32) -> u64 {
    0xffff_8880_7fc0_0000 + cpu as u64 * 0x8_0000
}

/// `mov 0x8(%rdi),%rax`: 8-byte read at rdi+8.
pub const LOAD_RDI_8: &[u8] = &[0x48, 0x8b, 0x47, 0x08];
/// `mov %rax,0x10(%rdi)`: 8-byte write at rdi+0x10.
pub const STORE_RDI_10: &[u8] = &[0x48, 0x89, 0x47, 0x10];
/// `mov 0x70(%rdi),%eax`: 4-byte read at rdi+0x70.
pub const LOAD_RDI_70: &[u8] = &[0x8b, 0x47, 0x70];
/// `lock incl 0x8(%rdi)`: 4-byte read-modify-write at rdi+8.
pub const LOCK_INC_RDI_8: &[u8] = &[0xf0, 0xff, 0x47, 0x08];
/// `mov %gs:0x1040,%rax`: per-CPU `runqueues`.
pub const LOAD_GS_1040: &[u8] = &[0x65, 0x48, 0x8b, 0x04, 0x25, 0x40, 0x10, 0x00, 0x00];
/// `mov 0x10(%rsp),%rax`: the stack.
pub const LOAD_RSP_10: &[u8] = &[0x48, 0x8b, 0x44, 0x24, 0x10];
/// `mov (%rbx),%rax`.
pub const LOAD_RBX: &[u8] = &[0x48, 0x8b, 0x03];
/// `lea 0x8(%rdi),%rax`: no access.
pub const LEA_RDI_8: &[u8] = &[0x48, 0x8d, 0x47, 0x08];
/// `mov %rax,%rdi`: no memory operand.
pub const MOV_RAX_RDI: &[u8] = &[0x48, 0x89, 0xc7];
/// `push %rdi`: an implicit memory operand.
pub const PUSH_RDI: &[u8] = &[0x57];
/// Not an instruction in 64-bit mode (`push %es`).
pub const INVALID: &[u8] = &[0x06];

/// ip of `do_sys_poll+0x10`, which reads `jiffies` RIP-relative.
pub const JIFFIES_READER_IP: u64 = 0xffff_ffff_8150_0010;

/// `mov disp32(%rip),%rax` at [`JIFFIES_READER_IP`] reading [`JIFFIES`].
#[must_use]
pub fn load_jiffies() -> [u8; 7] {
    let disp = JIFFIES.wrapping_sub(JIFFIES_READER_IP + 7) as u32;
    let d = disp.to_le_bytes();
    [0x48, 0x8b, 0x05, d[0], d[1], d[2], d[3]]
}

fn info(cache: u64, object_size: u32, size: u32, name: &[u8]) -> Record {
    Record::CacheInfo(
        CacheInfo {
            cache,
            object_size,
            size,
            align: 8,
            slab_flags: 0,
            name_len: 0,
            origin: CACHE_ORIGIN_WALK,
            name: [0; CACHE_NAME_BYTES],
        }
        .with_name(name),
    )
}

fn alloc(ptr: u64, call_site: u64, cache: u64, req: u32, got: u32, flags: u32) -> Record {
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
}

fn free(ptr: u64, call_site: u64, cache: u64) -> Record {
    Record::Free(Free {
        ptr,
        call_site,
        cache,
        flags: if cache == 0 { FREE_KFREE } else { 0 },
    })
}

/// A kernel sample at `ip` running `insn` with `%rdi = rdi`.
fn rdi(cpu: u32, ip: u64, insn: &[u8], rdi: u64) -> Record {
    kernel(cpu, ip, insn, &[(reg::RDI, rdi)])
}

fn kernel(cpu: u32, ip: u64, insn: &[u8], regs: &[(usize, u64)]) -> Record {
    let mut all = vec![(reg::RSP, RSP)];
    all.extend_from_slice(regs);
    Record::AccessSample(software_sample(ip, insn, &all, gs_base(cpu)))
}

fn user(ip: u64) -> Record {
    let mut s: AccessSample = software_sample(ip, MOV_RAX_RDI, &[], 0);
    s.flags = SAMPLE_USER;
    Record::AccessSample(s)
}

/// The records, in file order: (cpu, time, record), in two Records sections.
#[must_use]
#[allow(clippy::too_many_lines, reason = "a table of records")]
pub fn records() -> [Vec<(u32, u64, Record)>; 2] {
    const TCP_SENDMSG: u64 = 0xffff_ffff_8110_0000;
    const TCP_RECVMSG: u64 = 0xffff_ffff_8110_1000;
    const ALLOC_SKB: u64 = 0xffff_ffff_8120_0000;
    const SKB_RELEASE: u64 = 0xffff_ffff_8120_1000;
    const DUP_TASK: u64 = 0xffff_ffff_8131_0000;
    const SCHEDULE: u64 = 0xffff_ffff_8132_0000;
    const ALLOC_PIPE: u64 = 0xffff_ffff_8140_0000;
    const FREE_PIPE: u64 = 0xffff_ffff_8140_1000;
    const POLL: u64 = 0xffff_ffff_8150_0000;
    const ALLOC_FILE: u64 = 0xffff_ffff_8160_0000;
    let first = vec![
        (0, 100, info(SKB_CACHE, 232, 256, b"skbuff_head_cache")),
        (0, 101, info(TASK_CACHE, 4096, 4096, b"task_struct")),
        (0, 102, info(FILP_CACHE, 232, 256, b"filp")),
        (0, 103, info(KMALLOC_1K, 1024, 1024, b"kmalloc-1k")),
        (
            0,
            1_000,
            alloc(SKB_A, ALLOC_SKB + 0x42, SKB_CACHE, 232, 256, 0),
        ),
        (
            0,
            1_100,
            alloc(SKB_B, ALLOC_SKB + 0x42, SKB_CACHE, 232, 256, 0),
        ),
        (
            0,
            1_200,
            alloc(
                KM_SKB,
                ALLOC_SKB + 0x80,
                KMALLOC_1K,
                700,
                1024,
                ALLOC_KMALLOC,
            ),
        ),
        (0, 1_300, rdi(0, TCP_SENDMSG + 0x10, STORE_RDI_10, SKB_A)),
        (0, 1_400, rdi(0, TCP_SENDMSG + 0x20, LOAD_RDI_70, SKB_A)),
        (0, 1_500, rdi(0, TCP_SENDMSG + 0x20, LOAD_RDI_70, SKB_B)),
        (0, 1_600, kernel(0, SCHEDULE + 0x30, LOAD_GS_1040, &[])),
        // CPU 0's ring was drained past t=5000 before CPU 1's: CPU 1's records at 1700..4500
        // come later in the file, and the sample at 4500 must still see the first SKB_B.
        (0, 5_000, free(SKB_B, SKB_RELEASE + 0x10, SKB_CACHE)),
        (
            0,
            5_100,
            alloc(SKB_B, ALLOC_SKB + 0x42, SKB_CACHE, 232, 256, 0),
        ),
        (1, 1_700, rdi(1, TCP_RECVMSG + 0x40, LOAD_RDI_70, SKB_A)),
        (1, 1_800, rdi(1, TCP_RECVMSG + 0x40, LOAD_RDI_70, KM_SKB)),
        (1, 1_900, kernel(1, SCHEDULE + 0x30, LOAD_GS_1040, &[])),
        (1, 4_500, rdi(1, TCP_RECVMSG + 0x50, LOAD_RDI_8, SKB_B)),
        (1, 5_200, rdi(1, TCP_RECVMSG + 0x50, LOAD_RDI_8, SKB_B)),
        (1, 5_300, rdi(1, TCP_RECVMSG + 0x60, LOCK_INC_RDI_8, SKB_B)),
    ];
    let second = vec![
        (
            2,
            2_000,
            alloc(TASK, DUP_TASK + 0x20, TASK_CACHE, 4096, 4096, 0),
        ),
        (2, 2_100, rdi(2, SCHEDULE + 0x40, LOAD_RDI_8, TASK)),
        (2, 2_200, rdi(2, SCHEDULE + 0x48, STORE_RDI_10, TASK)),
        (2, 2_300, rdi(2, SCHEDULE + 0x40, LOAD_RDI_8, TASK)),
        (
            2,
            2_400,
            alloc(LARGE, POLL + 0x30, 0, 16_384, 16_384, ALLOC_KMALLOC),
        ),
        (2, 2_500, rdi(2, POLL + 0x50, LOAD_RDI_8, LARGE + 0x2000)),
        (2, 2_600, kernel(2, SCHEDULE + 0x50, LOAD_RSP_10, &[])),
        (2, 2_700, kernel(2, JIFFIES_READER_IP, &load_jiffies(), &[])),
        // CPU 2 reads CPU 1's runqueues through a pointer: a remote per-CPU access.
        (
            2,
            2_800,
            kernel(
                2,
                SCHEDULE + 0x60,
                LOAD_RBX,
                &[(reg::RBX, gs_base(1) + 0x1048)],
            ),
        ),
        (
            3,
            3_000,
            alloc(
                KM_PIPE,
                ALLOC_PIPE + 0x20,
                KMALLOC_1K,
                640,
                1024,
                ALLOC_KMALLOC,
            ),
        ),
        (
            3,
            3_100,
            alloc(FILP, ALLOC_FILE + 0x20, FILP_CACHE, 232, 256, 0),
        ),
        (3, 3_200, rdi(3, ALLOC_PIPE + 0x60, STORE_RDI_10, KM_PIPE)),
        (3, 3_300, user(0x40_1000)),
        (3, 3_400, rdi(3, POLL + 0x60, INVALID, 0)),
        (3, 3_500, rdi(3, POLL + 0x64, MOV_RAX_RDI, 0)),
        (3, 3_600, rdi(3, POLL + 0x68, LEA_RDI_8, KM_PIPE)),
        (3, 3_700, rdi(3, POLL + 0x70, LOAD_RDI_8, UNKNOWN)),
        (3, 3_800, rdi(3, POLL + 0x74, &[], 0)),
        (3, 3_900, rdi(3, POLL + 0x78, PUSH_RDI, 0)),
        // A free of an object allocated before collection, and kfree(NULL).
        (3, 4_000, free(0xffff_8880_0a00_0000, FREE_PIPE + 0x8, 0)),
        (3, 4_100, free(0, FREE_PIPE + 0x8, 0)),
        (3, 4_200, free(KM_PIPE, FREE_PIPE + 0x10, 0)),
        // After the free the address is unknown again.
        (3, 4_300, rdi(3, ALLOC_PIPE + 0x70, LOAD_RDI_8, KM_PIPE)),
    ];
    [first, second]
}

/// The header: the library's example header (4 CPUs, `slab_nomerge`).
#[must_use]
pub fn header() -> ProfileHeader {
    example_header()
}

/// The whole profile.
#[must_use]
pub fn profile() -> Vec<u8> {
    profile_with(&header(), KALLSYMS, &records())
}

/// A profile with this header, kallsyms and records (one Records section per element).
#[must_use]
pub fn profile_with(
    header: &ProfileHeader,
    kallsyms: &str,
    chunks: &[Vec<(u32, u64, Record)>],
) -> Vec<u8> {
    let encoded: Vec<Vec<u8>> = chunks
        .iter()
        .map(|chunk| {
            chunk
                .iter()
                .flat_map(|(cpu, t, r)| encode_record(*cpu, *t, r))
                .collect()
        })
        .collect();
    let count: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    let bytes_read = encoded.iter().map(|c| c.len() as u64).sum();
    let stop = StopInfo {
        reason: StopReason::CommandExited { status: 0 },
        ended_unix_s: 1_700_000_001,
        elapsed_ns: 5_300,
        device: Some(DeviceCounters {
            records_written: count,
            records_lost: 0,
            bytes_read,
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
        let mut enc = ProfileEncoder::new(Vec::new(), header, kallsyms.as_bytes(), b"")?;
        for chunk in &encoded {
            if !chunk.is_empty() {
                enc.records(chunk)?;
            }
        }
        enc.finish(&stop)
    })();
    // Writing to a Vec cannot fail and the records above are valid; an empty Vec makes every
    // test using it fail loudly.
    result.unwrap_or_default()
}
