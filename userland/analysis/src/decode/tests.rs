//! Hand-assembled instructions (AT&T syntax in the comments) with register files.

use dprof_abi::{reg, AccessSample, SAMPLE_USER};

use super::*;
use dprof_fixtures::profile::software_sample;

const IP: u64 = 0xffff_ffff_8100_0000;
const GS: u64 = 0xffff_8880_7fc0_0000;

fn sample(insn: &[u8], regs: &[(usize, u64)]) -> AccessSample {
    software_sample(IP, insn, regs, GS)
}

fn access(insn: &[u8], regs: &[(usize, u64)]) -> DecodeOutcome {
    Decoder::new().access(&sample(insn, regs))
}

fn mem(addr: u64, size: u32, kind: AccessKind) -> DecodeOutcome {
    DecodeOutcome::Access(MemAccess {
        addr,
        size,
        kind,
        gs_relative: false,
    })
}

fn gs_mem(addr: u64, size: u32, kind: AccessKind) -> DecodeOutcome {
    DecodeOutcome::Access(MemAccess {
        addr,
        size,
        kind,
        gs_relative: true,
    })
}

fn none(reason: NoAccess) -> DecodeOutcome {
    DecodeOutcome::None(reason)
}

use dprof_model::AccessKind;
use AccessKind::{Read, ReadWrite, Write};

#[test]
fn loads_and_stores_through_base_registers() {
    // mov (%rdi),%rax
    assert_eq!(
        access(&[0x48, 0x8b, 0x07], &[(reg::RDI, 0x1000)]),
        mem(0x1000, 8, Read)
    );
    // mov %rax,0x10(%rbx)
    assert_eq!(
        access(&[0x48, 0x89, 0x43, 0x10], &[(reg::RBX, 0x2000)]),
        mem(0x2010, 8, Write)
    );
    // mov -0x8(%rbp),%rax: negative displacements are sign-extended.
    assert_eq!(
        access(&[0x48, 0x8b, 0x45, 0xf8], &[(reg::RBP, 0x4000)]),
        mem(0x3ff8, 8, Read)
    );
    // movzbl (%rsi),%eax: one byte.
    assert_eq!(
        access(&[0x0f, 0xb6, 0x06], &[(reg::RSI, 0x5000)]),
        mem(0x5000, 1, Read)
    );
    // movdqu (%rax),%xmm0 and movdqu %xmm0,(%rax): 16 bytes.
    assert_eq!(
        access(&[0xf3, 0x0f, 0x6f, 0x00], &[(reg::RAX, 0x6000)]),
        mem(0x6000, 16, Read)
    );
    assert_eq!(
        access(&[0xf3, 0x0f, 0x7f, 0x00], &[(reg::RAX, 0x6000)]),
        mem(0x6000, 16, Write)
    );
    // jmp *(%rax): an indirect jump reads its target from memory.
    assert_eq!(
        access(&[0xff, 0x20], &[(reg::RAX, 0x7000)]),
        mem(0x7000, 8, Read)
    );
}

#[test]
fn base_index_scale_and_extended_registers() {
    // add %eax,(%rcx,%rdx,8)
    assert_eq!(
        access(&[0x01, 0x04, 0xd1], &[(reg::RCX, 0x3000), (reg::RDX, 3)]),
        mem(0x3018, 4, ReadWrite)
    );
    // mov (%r12,%r13,2),%rax
    assert_eq!(
        access(
            &[0x4b, 0x8b, 0x04, 0x6c],
            &[(reg::R8 + 4, 0x100), (reg::R8 + 5, 0x10)]
        ),
        mem(0x120, 8, Read)
    );
    // mov 0x18(%r15),%rdx
    assert_eq!(
        access(&[0x49, 0x8b, 0x57, 0x18], &[(reg::R15, 0x8000)]),
        mem(0x8018, 8, Read)
    );
    // movabs 0xffffffff82000000,%eax: an absolute address, no registers.
    assert_eq!(
        access(&[0xa1, 0x00, 0x00, 0x00, 0x82, 0xff, 0xff, 0xff, 0xff], &[]),
        mem(0xffff_ffff_8200_0000, 4, Read)
    );
}

#[test]
fn read_modify_writes() {
    // incl 0x8(%rbp)
    assert_eq!(
        access(&[0xff, 0x45, 0x08], &[(reg::RBP, 0x4000)]),
        mem(0x4008, 4, ReadWrite)
    );
    // lock xadd %eax,(%rdi)
    assert_eq!(
        access(&[0xf0, 0x0f, 0xc1, 0x07], &[(reg::RDI, 0x9000)]),
        mem(0x9000, 4, ReadWrite)
    );
    // cmpxchg %rcx,(%rdx): writes only when equal, still a read-write.
    assert_eq!(
        access(&[0x48, 0x0f, 0xb1, 0x0a], &[(reg::RDX, 0xa000)]),
        mem(0xa000, 8, ReadWrite)
    );
    // xchg %rax,(%rdi)
    assert_eq!(
        access(&[0x48, 0x87, 0x07], &[(reg::RDI, 0xb000)]),
        mem(0xb000, 8, ReadWrite)
    );
}

#[test]
fn rip_relative_is_next_ip_plus_displacement() {
    // mov 0x1234(%rip),%rax, 7 bytes.
    assert_eq!(
        access(&[0x48, 0x8b, 0x05, 0x34, 0x12, 0x00, 0x00], &[]),
        mem(IP + 7 + 0x1234, 8, Read)
    );
    // mov %eax,-0x10(%rip): 6 bytes, negative displacement.
    assert_eq!(
        access(&[0x89, 0x05, 0xf0, 0xff, 0xff, 0xff], &[]),
        mem(IP + 6 - 0x10, 4, Write)
    );
}

#[test]
fn gs_relative_adds_the_per_cpu_base() {
    // mov %gs:0x28,%rax
    assert_eq!(
        access(&[0x65, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00], &[]),
        gs_mem(GS + 0x28, 8, Read)
    );
    // mov %gs:(%rax),%rcx
    assert_eq!(
        access(&[0x65, 0x48, 0x8b, 0x08], &[(reg::RAX, 0x1040)]),
        gs_mem(GS + 0x1040, 8, Read)
    );
    // incl %gs:0x10(%rdx)
    assert_eq!(
        access(&[0x65, 0xff, 0x42, 0x10], &[(reg::RDX, 0x100)]),
        gs_mem(GS + 0x110, 4, ReadWrite)
    );
    // mov %fs:0x28,%rax: the sample has no %fs base.
    assert_eq!(
        access(&[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00], &[]),
        none(NoAccess::UnsupportedSegment)
    );
}

#[test]
fn thirty_two_bit_addressing_zero_extends_and_wraps() {
    // mov (%eax),%ecx: only the low 32 bits of %rax count.
    assert_eq!(
        access(&[0x67, 0x8b, 0x08], &[(reg::RAX, 0xdead_beef_0000_1000)]),
        mem(0x1000, 4, Read)
    );
    // mov (%eax,%ebx,4),%ecx
    assert_eq!(
        access(
            &[0x67, 0x8b, 0x0c, 0x98],
            &[
                (reg::RAX, 0xffff_ffff_0000_0010),
                (reg::RBX, 0xffff_ffff_0000_0002)
            ]
        ),
        mem(0x18, 4, Read)
    );
    // mov 0x20(%eax),%ecx wraps around 4 GiB.
    assert_eq!(
        access(&[0x67, 0x8b, 0x48, 0x20], &[(reg::RAX, 0xffff_fff0)]),
        mem(0x10, 4, Read)
    );
    // The segment base is added after the cut: mov %gs:(%eax),%ecx.
    assert_eq!(
        access(
            &[0x65, 0x67, 0x8b, 0x08],
            &[(reg::RAX, 0xffff_ffff_0000_0008)]
        ),
        gs_mem(GS + 8, 4, Read)
    );
}

#[test]
fn address_only_and_no_memory_operand() {
    // lea 0x8(%rdi),%rax
    assert_eq!(
        access(&[0x48, 0x8d, 0x47, 0x08], &[(reg::RDI, 0x1000)]),
        none(NoAccess::AddressOnly)
    );
    for (what, insn) in [
        ("nop", &[0x90][..]),
        ("nopl 0x0(%rax)", &[0x0f, 0x1f, 0x40, 0x00]),
        ("jmp .", &[0xeb, 0xfe]),
        ("mov %rax,%rbx", &[0x48, 0x89, 0xc3]),
        ("add $1,%eax", &[0x83, 0xc0, 0x01]),
        ("jne rel32", &[0x0f, 0x85, 0x10, 0x00, 0x00, 0x00]),
    ] {
        assert_eq!(access(insn, &[]), none(NoAccess::NoMemoryOperand), "{what}");
    }
}

fn two(first: DecodeOutcome, second: DecodeOutcome) -> DecodeOutcome {
    match (first, second) {
        (DecodeOutcome::Access(a), DecodeOutcome::Access(b)) => DecodeOutcome::Two([a, b]),
        _ => panic!("two accesses"),
    }
}

#[test]
fn implicit_operands_and_second_locations_are_accesses() {
    let regs = [
        (reg::RAX, 0x1000),
        (reg::RSP, 0x2000),
        (reg::RSI, 0x3000),
        (reg::RDI, 0x4000),
        (reg::RBP, 0x5000),
        (reg::RBX, 0x6000),
    ];
    for (what, insn, expected) in [
        ("push %rax", &[0x50][..], mem(0x1ff8, 8, Write)),
        ("pop %rbx", &[0x5b], mem(0x2000, 8, Read)),
        (
            "push (%rax)",
            &[0xff, 0x30],
            two(mem(0x1000, 8, Read), mem(0x1ff8, 8, Write)),
        ),
        (
            "pop (%rax)",
            &[0x8f, 0x00],
            two(mem(0x1000, 8, Write), mem(0x2000, 8, Read)),
        ),
        // The destination first, as the operands are written; each iteration one element.
        (
            "rep movsb",
            &[0xf3, 0xa4],
            two(mem(0x4000, 1, Write), mem(0x3000, 1, Read)),
        ),
        (
            "movsq",
            &[0x48, 0xa5],
            two(mem(0x4000, 8, Write), mem(0x3000, 8, Read)),
        ),
        (
            "rep stos %rax,(%rdi)",
            &[0xf3, 0x48, 0xab],
            mem(0x4000, 8, Write),
        ),
        ("lods (%rsi),%al", &[0xac], mem(0x3000, 1, Read)),
        ("scas (%rdi),%al", &[0xae], mem(0x4000, 1, Read)),
        (
            "cmpsb",
            &[0xa6],
            two(mem(0x3000, 1, Read), mem(0x4000, 1, Read)),
        ),
        (
            "call rel32",
            &[0xe8, 0x00, 0x00, 0x00, 0x00],
            mem(0x1ff8, 8, Write),
        ),
        (
            "call *(%rax)",
            &[0xff, 0x10],
            two(mem(0x1000, 8, Read), mem(0x1ff8, 8, Write)),
        ),
        ("ret", &[0xc3], mem(0x2000, 8, Read)),
        ("leave", &[0xc9], mem(0x5000, 8, Read)),
        (
            "enter $0x10,$0",
            &[0xc8, 0x10, 0x00, 0x00],
            mem(0x1ff8, 8, Write),
        ),
        // xlat: (%rbx,%al), %al being 0 here.
        ("xlat", &[0xd7], mem(0x6000, 1, Read)),
        // vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0: one address per element.
        (
            "vpgatherdd",
            &[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88],
            none(NoAccess::MultipleMemoryOperands),
        ),
    ] {
        assert_eq!(access(insn, &regs), expected, "{what}");
    }
}

#[test]
fn implicit_operands_are_flagged_for_histories() {
    for (what, insn, implicit) in [
        ("push %rax", &[0x50][..], true),
        ("push (%rax)", &[0xff, 0x30], true),
        ("rep movsb", &[0xf3, 0xa4], true),
        ("mov (%rdi),%rax", &[0x48, 0x8b, 0x07], false),
        ("add $1,%eax", &[0x83, 0xc0, 0x01], false),
    ] {
        let decoded = decode_insn(insn, IP).expect("decodes");
        assert_eq!(decoded.has_implicit_operand(), implicit, "{what}");
    }
}

#[test]
fn missing_truncated_and_user_samples() {
    let mut empty = sample(&[], &[]);
    empty.insn_len = 0;
    assert_eq!(Decoder::new().access(&empty), none(NoAccess::NoBytes));
    // mov (%rdi),%rax cut after two bytes; mov 0x1234(%rip),%rax cut in its displacement.
    assert_eq!(access(&[0x48, 0x8b], &[]), none(NoAccess::Undecodable));
    assert_eq!(
        access(&[0x48, 0x8b, 0x05, 0x34, 0x12], &[]),
        none(NoAccess::Undecodable)
    );
    // ud2 decodes; 0x06 (push %es) is invalid in 64-bit mode.
    assert_eq!(access(&[0x06], &[]), none(NoAccess::Undecodable));
    let mut user = sample(&[0x48, 0x8b, 0x07], &[(reg::RDI, 0x1000)]);
    user.flags = SAMPLE_USER;
    assert_eq!(Decoder::new().access(&user), none(NoAccess::UserMode));
}

#[test]
fn trailing_bytes_belong_to_the_next_instruction() {
    // mov (%rdi),%rax; ret; int3 ...: 16 bytes captured, only the first 3 count.
    let mut bytes = [0xccu8; 16];
    bytes[..4].copy_from_slice(&[0x48, 0x8b, 0x07, 0xc3]);
    let mut d = Decoder::new();
    let s = sample(&bytes, &[(reg::RDI, 0x1000)]);
    assert_eq!(d.access(&s), mem(0x1000, 8, Read));
    let insn = d.instruction(&s).expect("decodes");
    assert_eq!((insn.len, insn.mnemonic().as_str()), (3, "mov"));
}

#[test]
fn undecodable_instructions_and_the_last_ip_are_not_lost_in_the_cache() {
    let mut d = Decoder::new();
    // Does not decode at a new ip: nothing cached.
    let bad = software_sample(IP + 0x40, &[0x48, 0x89], &[], GS);
    assert_eq!(d.access(&bad), none(NoAccess::Undecodable));
    assert_eq!(d.cached_instructions(), 0);
    // The ip the cache's table keeps for its vacant buckets is still decoded once.
    for i in 1..=3 {
        let last = software_sample(
            u64::MAX,
            &[0x48, 0x8b, 0x47, 0x10],
            &[(reg::RDI, 0x1000)],
            GS,
        );
        assert_eq!(d.access(&last), mem(0x1010, 8, Read));
        assert_eq!((d.stats().decoded, d.cached_instructions()), (1, 1), "{i}");
    }
    let other = sample(&[0x48, 0x8b, 0x07], &[(reg::RDI, 0x2000)]);
    assert_eq!(d.access(&other), mem(0x2000, 8, Read));
    assert_eq!((d.stats().decoded, d.cached_instructions()), (2, 2));
}

#[test]
fn the_cache_decodes_a_hot_ip_once_and_notices_patched_code() {
    let mut d = Decoder::new();
    for i in 0..1000 {
        let s = sample(&[0x48, 0x8b, 0x47, 0x10], &[(reg::RDI, 0x1000 * i)]);
        assert_eq!(d.access(&s), mem(0x1000 * i + 0x10, 8, Read));
    }
    assert_eq!(d.stats().decoded, 1);
    assert_eq!(d.cached_instructions(), 1);
    // Same ip, other bytes (a static key flipped): decoded again.
    let patched = sample(&[0x48, 0x89, 0x47, 0x10], &[(reg::RDI, 0x1000)]);
    assert_eq!(d.access(&patched), mem(0x1010, 8, Write));
    assert_eq!(d.stats().decoded, 2);
    // Fewer bytes captured than the cached instruction needs: not a hit.
    let short = sample(&[0x48, 0x89], &[]);
    assert_eq!(d.access(&short), none(NoAccess::Undecodable));
    assert_eq!(d.cached_instructions(), 1);
}

#[test]
fn stats_count_every_outcome() {
    let mut d = Decoder::new();
    let mut user = sample(&[0x90], &[]);
    user.flags = SAMPLE_USER;
    for s in [
        sample(&[0x48, 0x8b, 0x07], &[]),
        sample(&[0x48, 0x89, 0x07], &[]),
        sample(&[0xf0, 0x0f, 0xc1, 0x07], &[]),
        sample(&[0x65, 0x48, 0x8b, 0x08], &[]),
        sample(&[0x90], &[]),
        // push %rax; push (%rax); vpgatherdd %ymm2,(%rax,%ymm1,4),%ymm0
        sample(&[0x50], &[]),
        sample(&[0xff, 0x30], &[]),
        sample(&[0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88], &[]),
        user,
    ] {
        d.access(&s);
    }
    let st = *d.stats();
    assert_eq!(st.samples, 9);
    assert_eq!(st.with_address(), 6);
    assert_eq!(
        (st.reads, st.writes, st.read_writes, st.gs_relative),
        (3, 2, 1, 1)
    );
    assert_eq!(st.second_operands, 1);
    assert_eq!(st.count(NoAccess::NoMemoryOperand), 1);
    assert_eq!(st.count(NoAccess::MultipleMemoryOperands), 1);
    assert_eq!(st.count(NoAccess::UserMode), 1);
    assert_eq!(
        st.to_string(),
        "6 of 9 samples (66.7%) have a data address (1 of them at two locations); 1 no \
         memory operand, 1 more memory locations than two (gathers, enter), 1 user mode"
    );
    let mut twice = st;
    twice.merge(&st);
    assert_eq!(twice.samples, 18);
    assert_eq!((twice.user_mode, twice.second_operands), (2, 2));
}

/// `cargo test -p dprof --release -- --ignored decode_throughput --nocapture`: samples per
/// second over 4096 hot instructions (the cache-hit path).
#[test]
#[ignore = "a measurement, not a check"]
fn decode_throughput() {
    let insns: [&[u8]; 4] = [
        &[0x48, 0x8b, 0x47, 0x10],
        &[0x65, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00],
        &[0x01, 0x04, 0xd1],
        &[0x50],
    ];
    let samples: Vec<AccessSample> = (0..4096u64)
        .map(|i| {
            software_sample(
                IP + i * 16,
                insns[(i % 4) as usize],
                &[(reg::RDI, i << 12), (reg::RCX, 0x1000), (reg::RDX, i)],
                GS,
            )
        })
        .collect();
    let mut d = Decoder::new();
    let n = 4_000_000;
    let start = std::time::Instant::now();
    let mut sum = 0u64;
    for s in samples.iter().cycle().take(n) {
        if let DecodeOutcome::Access(a) = d.access(std::hint::black_box(s)) {
            sum = sum.wrapping_add(a.addr);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{n} samples in {secs:.3} s: {:.1} M samples/s ({} decoded, checksum {sum:#x})",
        n as f64 / secs / 1e6,
        d.stats().decoded
    );
}

#[test]
fn decoded_instructions_say_when_they_overwrite_their_address_registers() {
    // mov 0x8(%rax),%rax: the base is overwritten.
    let insn = decode_insn(&[0x48, 0x8b, 0x40, 0x08], IP).expect("decodes");
    assert!(insn.writes_address_register());
    assert_eq!(
        (insn.kind(), insn.size(), insn.end()),
        (Some(Read), Some(8), IP + 4)
    );
    // mov 0x8(%rax),%eax: a 32-bit write zero-extends into %rax, the same register.
    assert!(decode_insn(&[0x8b, 0x40, 0x08], IP)
        .expect("decodes")
        .writes_address_register());
    // mov (%rdi,%rsi,8),%rsi: the index is overwritten.
    assert!(decode_insn(&[0x48, 0x8b, 0x34, 0xf7], IP)
        .expect("decodes")
        .writes_address_register());
    // mov 0x8(%rax),%rcx and mov %rax,0x8(%rax): the address survives.
    assert!(!decode_insn(&[0x48, 0x8b, 0x48, 0x08], IP)
        .expect("decodes")
        .writes_address_register());
    assert!(!decode_insn(&[0x48, 0x89, 0x40, 0x08], IP)
        .expect("decodes")
        .writes_address_register());
    // rep movsb: a string op with implicit operands.
    let movs = decode_insn(&[0xf3, 0xa4], IP).expect("decodes");
    assert!(movs.is_string_op());
    assert!(movs.has_implicit_operand());
    assert_eq!(
        movs.access(&[0; dprof_abi::SAMPLE_REGS], 0),
        two(mem(0, 1, Write), mem(0, 1, Read))
    );
    assert_eq!(decode_insn(&[0x06], IP), Err(NoAccess::Undecodable));
    // The same access the sample decoder computes.
    let regs = {
        let mut r = [0u64; dprof_abi::SAMPLE_REGS];
        r[reg::RBX] = 0x2000;
        r
    };
    assert_eq!(
        decode_insn(&[0x48, 0x89, 0x43, 0x10], IP)
            .expect("decodes")
            .access(&regs, 0),
        access(&[0x48, 0x89, 0x43, 0x10], &[(reg::RBX, 0x2000)])
    );
}

#[test]
fn instruction_boundaries_stop_at_bytes_that_are_not_code() {
    // push %rbp; mov %rsp,%rbp; pop %rbp; ret; (push %es: invalid) nop
    let code = [0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0x06, 0x90];
    assert_eq!(
        instruction_boundaries(&code, IP),
        vec![(IP, 1), (IP + 1, 3), (IP + 4, 1), (IP + 5, 1)]
    );
    // A cut instruction at the end is not a boundary.
    assert_eq!(
        instruction_boundaries(&[0x55, 0x48, 0x89], IP),
        vec![(IP, 1)]
    );
}

#[test]
fn address_registers_name_what_each_operand_is_addressed_through() {
    let rsp = 1 << reg::RSP;
    // mov 0x10(%rdi),%rax
    assert_eq!(
        address_registers(&[0x48, 0x8b, 0x47, 0x10], IP),
        rsp | 1 << reg::RDI
    );
    // mov (%rax,%r12,8),%rbx: base and an extended index.
    assert_eq!(
        address_registers(&[0x4a, 0x8b, 0x1c, 0xe0], IP),
        rsp | 1 << reg::RAX | 1 << 12
    );
    // push %rbx: the stack only.
    assert_eq!(address_registers(&[0x53], IP), rsp);
    // movsq: both string operands.
    assert_eq!(
        address_registers(&[0x48, 0xa5], IP),
        rsp | 1 << reg::RSI | 1 << reg::RDI
    );
    // mov %gs:0x1040,%rax: no register, the segment base is stored apart.
    assert_eq!(
        address_registers(&[0x65, 0x48, 0x8b, 0x04, 0x25, 0x40, 0x10, 0x00, 0x00], IP),
        rsp
    );
    // add %rax,%rbx: no memory operand, no register kept.
    assert_eq!(address_registers(&[0x48, 0x01, 0xc3], IP), 0);
    // User mode and bytes that do not decode keep nothing.
    assert_eq!(address_registers(&[0x48, 0x8b, 0x47, 0x10], 0x40_1000), 0);
    assert_eq!(address_registers(&[0x48, 0x8b], IP), 0, "cut short");
    assert_eq!(address_registers(&[], IP), 0);
}

/// The registers [`address_registers`] keeps give every instruction the access that all
/// registers give: a profile that stores only them is analysed the same.
#[test]
fn address_registers_are_all_the_decoder_reads() {
    let instructions: [&[u8]; 9] = [
        &[0x48, 0x8b, 0x47, 0x10],
        &[0x4a, 0x8b, 0x1c, 0xe0],
        &[0x53],
        &[0x5b],
        &[0x48, 0xa5],
        &[0x65, 0x48, 0x8b, 0x04, 0x25, 0x40, 0x10, 0x00, 0x00],
        &[0x48, 0x01, 0xc3],
        &[0x89, 0x44, 0x24, 0x08],
        &[0x8b, 0x04, 0x8d, 0x00, 0x10, 0x00, 0x00],
    ];
    let all: Vec<(usize, u64)> = (0..16)
        .map(|r| (r, 0xffff_8880_0400_0000 + (r as u64) * 0x1234_5678))
        .collect();
    for insn in instructions {
        let keep = address_registers(insn, IP);
        let kept: Vec<(usize, u64)> = all
            .iter()
            .copied()
            .filter(|&(r, _)| keep & (1 << r) != 0)
            .collect();
        assert_eq!(access(insn, &kept), access(insn, &all), "{insn:02x?}");
    }
}

#[test]
fn base_operands_are_what_typing_by_instruction_reads() {
    let mut decoder = Decoder::new();
    let base_operand = |decoder: &mut Decoder, insn: &[u8]| {
        let s = sample(insn, &[]);
        let _ = decoder.access(&s);
        decoder.base_operand(s.ip)
    };
    // mov 0x20(%rdi),%eax: %rdi is DWARF register 5.
    let found = base_operand(&mut decoder, &[0x8b, 0x47, 0x20]).expect("disp(%base)");
    assert_eq!(
        (
            usize::from(found.register),
            found.displacement,
            found.dwarf_register()
        ),
        (reg::RDI, 0x20, 5)
    );
    // mov -0x8(%rbx),%rax: a negative displacement; %rbx is DWARF 3.
    let found = base_operand(&mut decoder, &[0x48, 0x8b, 0x43, 0xf8]).expect("disp(%base)");
    assert_eq!((found.displacement, found.dwarf_register()), (-8, 3));
    // mov 0x10(%r12),%rax: r8-r15 keep their numbers.
    let found = base_operand(&mut decoder, &[0x49, 0x8b, 0x44, 0x24, 0x10]).expect("r12");
    assert_eq!(found.dwarf_register(), 12);
    // With an index register, off the stack pointer, %gs-relative, RIP-relative, two
    // locations: none.
    for insn in [
        &[0x8b, 0x04, 0x87][..],                     // mov (%rdi,%rax,4),%eax
        &[0x48, 0x8b, 0x44, 0x24, 0x08],             // mov 0x8(%rsp),%rax
        &[0x65, 0x48, 0x8b, 0x47, 0x08],             // mov %gs:0x8(%rdi),%rax
        &[0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00], // mov 0x10(%rip),%rax
        &[0xff, 0x37],                               // push (%rdi)
    ] {
        assert_eq!(base_operand(&mut decoder, insn), None, "{insn:02x?}");
    }
}

#[test]
fn gs_operands_without_base_or_index_give_their_addresses() {
    const IP: u64 = 0xffff_ffff_8100_0000;
    let code = [
        // mov %gs:0xffffffff83b0e030,%rax: an absolute operand, sign-extended.
        &[0x65, 0x48, 0x8b, 0x04, 0x25, 0x30, 0xe0, 0xb0, 0x83][..],
        // decl %gs:0x100(%rip): the address of the next instruction plus 0x100.
        &[0x65, 0xff, 0x0d, 0x00, 0x01, 0x00, 0x00],
        // mov %gs:0x8(%rdi),%rax and mov %gs:(,%rax,8),%rcx: through registers, left out.
        &[0x65, 0x48, 0x8b, 0x47, 0x08],
        &[0x65, 0x48, 0x8b, 0x0c, 0xc5, 0x00, 0x00, 0x00, 0x00],
        // mov 0x10(%rip),%rax: not %gs.
        &[0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00],
        // Bytes that are no instruction are passed over.
        &[0x0f, 0xff, 0xff],
        // add %gs:0xffffffff83b0e040,%eax after them.
        &[0x65, 0x03, 0x04, 0x25, 0x40, 0xe0, 0xb0, 0x83],
    ]
    .concat();
    let decl_end = IP + 9 + 7;
    assert_eq!(
        gs_operand_addresses(&code, IP),
        [
            0xffff_ffff_83b0_e030,
            decl_end + 0x100,
            0xffff_ffff_83b0_e040
        ]
    );
    assert_eq!(gs_operand_addresses(&[], IP), Vec::<u64>::new());
}
