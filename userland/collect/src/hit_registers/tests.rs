use dprof_abi::{reg, Record, SAMPLE_REGS};
use dprof_analysis::pipeline::{self, Options};
use dprof_format::{HistoryRegisters, KernelText, Profile, ProfileEncoder, ALL_REGISTERS};

use super::*;
use crate::kcore::tests::fake_kcore;

/// `f1`, `f2` and `f3`: the first two in kernel memory, `f3`'s code unreadable.
const F1: u64 = 0xffff_ffff_8100_0000;
const F2: u64 = F1 + 0x10;
const F3: u64 = F1 + 0x20;
const KALLSYMS: &str = "\
ffffffff81000000 t f1
ffffffff81000010 t f2
ffffffff81000020 t f3
";

/// `f1` then `f2`, 32 bytes.
fn code() -> Vec<u8> {
    let mut code = vec![
        0x55, // f1+0 push %rbp
        0x48, 0x8b, 0x44, 0xcf, 0x10, // f1+1 mov 0x10(%rdi,%rcx,8),%rax
        0x48, 0x89, 0xc3, // f1+6 mov %rax,%rbx: no memory
        0x48, 0x8b, 0x56, 0x08, // f1+9 mov 0x8(%rsi),%rdx
        0x41, 0x8a, 0x00, // f1+0xd mov (%r8),%al, the last of f1
        0xf3, 0xa4, // f2+0 rep movsb
        0xc3, // f2+2 ret
    ];
    code.resize(0x20, 0xcc);
    code
}

fn bit(r: usize) -> u16 {
    1 << r
}

/// Every trap ip of the tests and the registers its hits keep.
fn expected() -> [(u64, u16); 7] {
    [
        (F1 + 6, bit(reg::RDI) | bit(reg::RCX)),
        (F1 + 9, 0),
        (F1 + 0xd, bit(reg::RSI)),
        // At f2's first byte: f1's last instruction, or `rep movsb` trapping on itself.
        (F2, bit(reg::R8) | bit(reg::RSI) | bit(reg::RDI)),
        // Inside an instruction: no accessing instruction ends there.
        (F1 + 3, ALL_REGISTERS),
        // Code that cannot be read, and an address no function holds.
        (F3 + 4, ALL_REGISTERS),
        (0x1000, ALL_REGISTERS),
    ]
}

#[test]
fn a_known_instruction_before_the_trap_gives_its_address_registers_read_from_kcore() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kcore");
    std::fs::write(&path, fake_kcore(F1, &code())).expect("write");
    let kcore = Kcore::open(&path).expect("opens");
    let mut finder = HitRegisterFinder::new(kcore, Kallsyms::parse(KALLSYMS.as_bytes()));
    for (trap_ip, registers) in expected() {
        assert_eq!(
            finder.registers(trap_ip),
            registers,
            "trap at {trap_ip:#x}: {registers:#06x} expected"
        );
    }
}

#[test]
fn unknown_code_keeps_every_register() {
    let mut finder =
        HitRegisterFinder::new(KernelText::new(), Kallsyms::parse(KALLSYMS.as_bytes()));
    assert_eq!(finder.registers(F1 + 6), ALL_REGISTERS, "no code at all");
    let mut filter = live_filter(
        Kallsyms::parse(KALLSYMS.as_bytes()),
        Path::new("/nonexistent/kcore"),
    );
    assert_eq!(filter(F1 + 6), ALL_REGISTERS, "kcore cannot be opened");
}

#[test]
fn a_profile_s_code_gives_the_registers_live_code_gives() {
    let mut text = KernelText::new();
    text.insert(F1, &code());
    let mut finder = HitRegisterFinder::new(text, Kallsyms::parse(KALLSYMS.as_bytes()));
    for (trap_ip, registers) in expected() {
        assert_eq!(finder.registers(trap_ip), registers, "trap at {trap_ip:#x}");
    }
}

/// `bytes` written anew with every register of every hit that its record left 0 set to a
/// value of its own: what a trap leaves in the registers the check does not read.
fn with_noisy_hits(bytes: Vec<u8>) -> Profile {
    let profile = Profile::from_vec(bytes).expect("valid");
    let mut enc = ProfileEncoder::new(
        Vec::new(),
        profile.header(),
        profile.kallsyms(),
        profile.modules(),
    )
    .expect("vec");
    if let Some(btf) = profile.btf() {
        enc.btf(btf).expect("btf");
    }
    for item in profile.records() {
        let (header, mut record) = item.expect("valid");
        if let Record::HistoryHit(hit) = &mut record {
            for (r, value) in hit.regs.iter_mut().enumerate() {
                if *value == 0 {
                    *value = 0x5a5a_0000_0000_0000 | (r as u64) << 16 | u64::from(hit.seq);
                }
            }
        }
        let mut wire = [0u8; dprof_abi::MAX_RECORD_SIZE];
        let size = record.encode(header.cpu, header.time_ns, &mut wire);
        enc.records(&wire[..size]).expect("valid");
    }
    let out = enc
        .finish_with_text(profile.stop(), profile.text())
        .expect("vec");
    Profile::from_vec(out).expect("valid")
}

fn hits(profile: &Profile) -> Vec<dprof_abi::HistoryHit> {
    profile
        .records()
        .filter_map(|item| match item.expect("valid").1 {
            Record::HistoryHit(hit) => Some(hit),
            _ => None,
        })
        .collect()
}

#[test]
fn hits_transcoded_with_the_filter_give_the_same_histories_report_as_with_every_register() {
    for (name, bytes) in [
        ("histories", dprof_fixtures::histories::profile()),
        ("full_histories", dprof_fixtures::full_histories::profile()),
        (
            "freed_elsewhere",
            dprof_fixtures::histories::freed_elsewhere_profile(),
        ),
    ] {
        let all = with_noisy_hits(bytes);
        let reduced = Profile::from_vec(transcode(&all, Vec::new(), true).expect("transcodes"))
            .expect("valid");
        assert_eq!(
            reduced.header().config.history_registers,
            HistoryRegisters::Address,
            "{name}"
        );
        let (before, after) = (hits(&all), hits(&reduced));
        assert_eq!(before.len(), after.len(), "{name}");
        let zeroed: usize = before
            .iter()
            .zip(&after)
            .map(|(a, b)| {
                assert_eq!((a.history, a.ip, a.seq), (b.history, b.ip, b.seq), "{name}");
                (0..SAMPLE_REGS)
                    .filter(|&r| {
                        assert!(b.regs[r] == a.regs[r] || b.regs[r] == 0, "{name}");
                        b.regs[r] != a.regs[r]
                    })
                    .count()
            })
            .sum();
        assert!(
            zeroed > before.len() * 10,
            "{name}: {zeroed} registers dropped from {} hits",
            before.len()
        );
        assert!(reduced.record_bytes() < all.record_bytes(), "{name}");
        let report = |p: &Profile| {
            pipeline::analyze(p, &Options::default())
                .expect("analysis")
                .histories
                .expect("histories")
        };
        let (expected, found) = (report(&all), report(&reduced));
        assert!(expected.checks.verified > 0, "{name}: {}", expected.checks);
        assert_eq!(found, expected, "{name}");
    }
}

#[test]
fn transcoding_without_the_filter_keeps_every_record_as_it_was() {
    let profile = with_noisy_hits(dprof_fixtures::histories::profile());
    let again = Profile::from_vec(transcode(&profile, Vec::new(), false).expect("transcodes"))
        .expect("valid");
    assert_eq!(again.header(), profile.header());
    assert_eq!(again.text(), profile.text());
    let records = |p: &Profile| p.records().collect::<Result<Vec<_>, _>>().expect("valid");
    assert_eq!(records(&again), records(&profile));
}
