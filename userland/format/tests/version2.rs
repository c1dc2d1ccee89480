//! Format version 2: version 1 files still read, their records survive being written as
//! version 2, the code table and the register filters (samples' and history hits'), and
//! corrupt blocks give errors.

mod support;
use support::sections_of;

use dprof_abi::{reg, Record, RecordHeader, RecordKind};
use dprof_fixtures::profile::{encode_record, example_header, software_sample};
use dprof_format::*;

const V1_FILES: [(&str, &[u8]); 4] = [
    ("example", include_bytes!("data/v1-example.dprof")),
    ("histories", include_bytes!("data/v1-histories.dprof")),
    ("causal", include_bytes!("data/v1-causal.dprof")),
    ("ibs", include_bytes!("data/v1-ibs.dprof")),
];

fn stop() -> StopInfo {
    StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 1,
        elapsed_ns: 2,
        device: None,
    }
}

fn records_of(profile: &Profile) -> Vec<(RecordHeader, Record)> {
    profile
        .records()
        .collect::<Result<_, _>>()
        .expect("valid records")
}

/// `profile`'s records written again by this version's writer (every register kept).
fn rewritten(profile: &Profile) -> Vec<u8> {
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
    for (header, record) in records_of(profile) {
        enc.records(&encode_record(header.cpu, header.time_ns, &record))
            .expect("valid");
    }
    enc.finish_with_text(profile.stop(), profile.text())
        .expect("vec")
}

/// Each CPU's records, in order.
fn per_cpu(records: &[(RecordHeader, Record)]) -> Vec<Vec<(RecordHeader, Record)>> {
    let mut out: Vec<Vec<_>> = Vec::new();
    for &(h, r) in records {
        let cpu = h.cpu as usize;
        if out.len() <= cpu {
            out.resize_with(cpu + 1, Vec::new);
        }
        out[cpu].push((h, r));
    }
    out
}

#[test]
fn version_1_files_still_read_and_survive_version_2() {
    for (name, bytes) in V1_FILES {
        let v1 = Profile::from_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v1.version(), 1, "{name}");
        let old = records_of(&v1);
        assert!(!old.is_empty(), "{name}");
        let v2_bytes = rewritten(&v1);
        let v2 = Profile::from_vec(v2_bytes.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v2.version(), FORMAT_VERSION, "{name}");
        assert_eq!(v2.header(), v1.header(), "{name}");
        assert_eq!(v2.text(), v1.text(), "{name}");
        assert_eq!(v2.btf(), v1.btf(), "{name}");
        let new = records_of(&v2);
        assert_eq!(
            per_cpu(&new),
            per_cpu(&old),
            "{name}: each CPU's records, in order"
        );
        assert!(
            new.windows(2).all(|w| w[0].0.time_ns <= w[1].0.time_ns),
            "{name}: version 2 reads in time order"
        );
        assert!(
            v2_bytes.len() < bytes.len(),
            "{name}: {} bytes as version 2, {} as version 1",
            v2_bytes.len(),
            bytes.len()
        );
    }
}

/// `v1-histories.dprof` as the version 2 writer (ABI 6, two ranges per `HistoryStart`) wrote
/// it, read by this version: the same records, the ranges added since unused.
#[test]
fn version_2_files_with_two_ranges_per_history_still_read() {
    let v1 = Profile::from_bytes(V1_FILES[1].1).expect("version 1");
    let v2 = Profile::from_bytes(include_bytes!("data/v2-histories.dprof")).expect("version 2");
    assert_eq!(v2.version(), 2);
    let (old, new) = (records_of(&v1), records_of(&v2));
    assert_eq!(per_cpu(&new), per_cpu(&old));
    let starts: Vec<_> = new
        .iter()
        .filter_map(|(_, r)| match r {
            Record::HistoryStart(s) => Some(s.ranges),
            _ => None,
        })
        .collect();
    assert!(!starts.is_empty());
    for ranges in starts {
        assert_ne!(ranges[0].len, 0);
        assert_eq!(ranges[2..], [dprof_abi::WatchRange::default(); 2]);
    }
}

/// A software sample of `mov 0x10(%rdi),%rax` (or `ip`'s own bytes) on `cpu` at `time`.
fn sample(cpu: u32, time: u64, ip: u64, rdi: u64) -> Vec<u8> {
    let mut s = software_sample(
        ip,
        &[0x48, 0x8b, 0x47, 0x10],
        &[
            (reg::RDI, rdi),
            (reg::RAX, 7),
            (reg::RSP, 0xffff_c900_0001_3e80),
        ],
        0xffff_8880_7fc0_0000,
    );
    s.pid = 10;
    s.tid = 11;
    encode_record(cpu, time, &Record::AccessSample(s))
}

fn samples(n: u64) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            sample(
                (i % 2) as u32,
                1_000_000 + i * 1_000,
                0xffff_ffff_8120_0060 + (i % 3) * 0x10,
                0xffff_8880_0401_0000 + i * 64,
            )
        })
        .collect()
}

#[test]
fn instructions_are_stored_once_and_samples_are_small() {
    let n = 10_000;
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    enc.records(&samples(n)).expect("valid");
    let per_sample = enc.kind_bytes()[RecordKind::AccessSample as usize] as f64 / n as f64;
    let bytes = enc.finish(&stop()).expect("vec");
    let profile = Profile::from_vec(bytes).expect("valid");
    assert_eq!(profile.code_entries(), 3, "three distinct instructions");
    assert!(per_sample <= 32.0, "{per_sample} bytes per sample");
    let records = records_of(&profile);
    assert_eq!(records.len(), n as usize);
    let Record::AccessSample(s) = records[5].1 else {
        panic!("a sample")
    };
    assert_eq!(s.insn_bytes(), [0x48, 0x8b, 0x47, 0x10]);
    assert_eq!(s.ip, 0xffff_ffff_8120_0060 + (5 % 3) * 0x10);
    assert_eq!(s.regs[reg::RAX], 7, "every register is kept by default");
}

#[test]
fn the_register_filter_keeps_only_what_it_names() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    enc.set_register_filter(Box::new(move |ip, insn| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(insn, [0x48, 0x8b, 0x47, 0x10]);
        assert!(ip >= 0xffff_ffff_8120_0060);
        (1 << reg::RDI) | (1 << reg::RSP)
    }));
    enc.records(&samples(100)).expect("valid");
    let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::Relaxed),
        3,
        "once per instruction"
    );
    for (_, record) in records_of(&profile) {
        let Record::AccessSample(s) = record else {
            panic!("a sample")
        };
        assert_eq!(s.regs[reg::RAX], 0, "not kept");
        assert_ne!(s.regs[reg::RDI], 0);
        assert_eq!(s.regs[reg::RSP], 0xffff_c900_0001_3e80);
        assert_eq!((s.pid, s.tid), (10, 11));
    }
}

/// A history hit of history `history` trapping at `ip`, every register set (`r + 1` in the
/// upper half, so that no two are alike).
fn hit(cpu: u32, time: u64, history: u64, ip: u64, seq: u32) -> Vec<u8> {
    let hit = dprof_abi::HistoryHit {
        history,
        ip,
        regs: std::array::from_fn(|r| ((r as u64 + 1) << 32) | time),
        pid: 10,
        tid: 11,
        range: 1,
        seq,
        ..dprof_abi::HistoryHit::default()
    };
    encode_record(cpu, time, &Record::HistoryHit(hit))
}

#[test]
fn the_hit_register_filter_zeroes_what_it_does_not_keep_and_is_asked_once_per_trap_ip() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let (kept_ip, all_ip) = (0xffff_ffff_8120_0064, 0xffff_ffff_8130_0000);
    enc.set_hit_register_filter(Box::new(move |ip| {
        seen.lock().expect("not poisoned").push(ip);
        if ip == kept_ip {
            (1 << reg::RDI) | (1 << reg::R8)
        } else {
            ALL_REGISTERS
        }
    }));
    let records: Vec<u8> = (0..100u32)
        .flat_map(|i| {
            let ip = if i % 2 == 0 { kept_ip } else { all_ip };
            hit(i % 2, 1000 + u64::from(i), u64::from(i / 4), ip, i)
        })
        .collect();
    enc.records(&records).expect("valid");
    let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
    let mut asked = asked.lock().expect("not poisoned").clone();
    asked.sort_unstable();
    assert_eq!(asked, [kept_ip, all_ip], "once per trap ip");
    let read = records_of(&profile);
    assert_eq!(read.len(), 100);
    for (header, record) in read {
        let Record::HistoryHit(h) = record else {
            panic!("a hit")
        };
        let time = header.time_ns;
        let set = |r: usize| ((r as u64 + 1) << 32) | time;
        if h.ip == kept_ip {
            for r in 0..dprof_abi::SAMPLE_REGS {
                let expected = if r == reg::RDI || r == reg::R8 {
                    set(r)
                } else {
                    0
                };
                assert_eq!(h.regs[r], expected, "register {r} at {time}");
            }
        } else {
            assert_eq!(h.regs, std::array::from_fn(set), "all kept at {time}");
        }
        // Nothing else of the hit changes.
        assert_eq!((h.pid, h.tid, h.range), (10, 11, 1));
        assert_eq!(u64::from(h.seq), time - 1000);
        assert_eq!(h.history, (time - 1000) / 4);
    }
}

#[test]
fn hits_keep_every_register_without_a_filter() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    enc.records(&hit(0, 5, 1, 0xffff_ffff_8120_0064, 0))
        .expect("valid");
    let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
    let Record::HistoryHit(h) = records_of(&profile)[0].1 else {
        panic!("a hit")
    };
    assert_eq!(h.regs, std::array::from_fn(|r| ((r as u64 + 1) << 32) | 5));
}

#[test]
fn the_history_registers_header_field_round_trips_and_old_headers_read_as_all() {
    let mut header = example_header();
    assert_eq!(header.config.history_registers, HistoryRegisters::All);
    let json = serde_json::to_string(&header).expect("json");
    assert!(
        !json.contains("history_registers"),
        "all, the default, is not written: {json}"
    );
    let old: ProfileHeader = serde_json::from_str(&json).expect("a header without the field");
    assert_eq!(old.config.history_registers, HistoryRegisters::All);
    header.config.history_registers = HistoryRegisters::Address;
    let json = serde_json::to_string(&header).expect("json");
    assert!(json.contains(r#""history_registers":"address""#), "{json}");
    let enc = ProfileEncoder::new(Vec::new(), &header, b"", b"").expect("vec");
    let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
    assert_eq!(
        profile.header().config.history_registers,
        HistoryRegisters::Address
    );
}

fn small_profile() -> Vec<u8> {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    enc.records(&samples(40)).expect("valid");
    enc.finish(&stop()).expect("vec")
}

#[test]
fn a_block_with_a_bad_crc_is_an_error_from_the_iterator() {
    let mut bytes = small_profile();
    let (_, block, _) = sections_of(&bytes)
        .into_iter()
        .find(|s| s.0 == SectionKind::Block as u32)
        .expect("a block");
    bytes[block + SECTION_HEADER_SIZE + BLOCK_HEADER_SIZE + 3] ^= 0x10;
    let profile = Profile::from_bytes(&bytes).expect("opens: the blocks are read later");
    let err = profile.validate().expect_err("bad CRC");
    assert!(
        matches!(err, ProfileError::Checksum { kind: SectionKind::Block, offset, .. } if offset == block as u64),
        "{err}"
    );
}

#[test]
fn a_file_cut_inside_a_block_fails_at_open() {
    let bytes = small_profile();
    let (_, block, len) = sections_of(&bytes)
        .into_iter()
        .find(|s| s.0 == SectionKind::Block as u32)
        .expect("a block");
    let cut = block + SECTION_HEADER_SIZE + len / 2;
    let err = Profile::from_bytes(&bytes[..cut]).expect_err("cut");
    assert!(
        matches!(
            err,
            ProfileError::TruncatedSection {
                kind: SectionKind::Block,
                ..
            }
        ),
        "{err}"
    );
}

/// Every byte of every Code and Block section changed, with the CRC made right again: the
/// reader gives records or an error with an offset inside the file, and never panics.
#[test]
fn any_corrupt_byte_in_the_records_is_an_error_or_a_record_never_a_panic() {
    let bytes = small_profile();
    let mut errors = 0;
    for (kind, at, len) in sections_of(&bytes) {
        if kind != SectionKind::Block as u32 && kind != SectionKind::Code as u32 {
            continue;
        }
        let payload = at + SECTION_HEADER_SIZE..at + SECTION_HEADER_SIZE + len;
        for i in payload.clone() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                let crc = crc32fast::hash(&bad[payload.clone()]);
                bad[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
                let outcome = Profile::from_bytes(&bad).and_then(|p| p.validate());
                if let Err(e) = outcome {
                    errors += 1;
                    let offset = e.offset().expect("about the bytes");
                    assert!(offset <= bad.len() as u64, "{e}");
                }
            }
        }
    }
    assert!(errors > 100, "{errors} corruptions found");
}

/// `n` hardware samples cycling through the hardware example's accesses, each at its own
/// address (within a few objects), time and CPU, with the IBS registers agreeing.
fn hardware_samples(sampler: dprof_fixtures::hardware::Sampler, n: u64) -> Vec<u8> {
    use dprof_abi::{IBS_DC_LIN_AD, IBS_OP_DATA3};
    let examples: Vec<dprof_abi::AccessSample> = dprof_fixtures::hardware::records(sampler)
        .into_iter()
        .filter_map(|(_, _, r)| match r {
            Record::AccessSample(s) => Some(s),
            _ => None,
        })
        .collect();
    assert!(!examples.is_empty());
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .flat_map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut s = examples[(state % examples.len() as u64) as usize];
            let shift = (state >> 20) % 512 * 64;
            s.data_addr = s.data_addr.wrapping_add(shift);
            s.latency = s.latency.wrapping_add((state >> 40) as u32 % 64);
            if let Some(regs) = s.ibs.as_mut() {
                regs.regs[IBS_DC_LIN_AD] = s.data_addr;
                let lat = u64::from(s.latency) << 32;
                regs.regs[IBS_OP_DATA3] = regs.regs[IBS_OP_DATA3] & 0xffff_ffff | lat;
            }
            encode_record(
                (i % 4) as u32,
                1_000_000 + i * 2_500,
                &Record::AccessSample(s),
            )
        })
        .collect()
}

#[test]
fn hardware_samples_take_at_most_48_bytes() {
    use dprof_fixtures::hardware::Sampler;
    for (sampler, kind) in [
        (Sampler::Ibs, RecordKind::IbsSample),
        (Sampler::Pebs, RecordKind::AccessSample),
    ] {
        let n = 20_000;
        let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
        let records = hardware_samples(sampler, n);
        enc.records(&records).expect("valid");
        let per_sample = enc.bytes_per_record(kind).expect("samples");
        eprintln!("{sampler:?}: {per_sample:.1} bytes per sample");
        assert!(
            per_sample <= 48.0,
            "{sampler:?}: {per_sample:.1} bytes per sample, {} as ABI records",
            records.len() as u64 / n
        );
        let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
        let back: Vec<u8> = records_of(&profile)
            .iter()
            .flat_map(|(h, r)| encode_record(h.cpu, h.time_ns, r))
            .collect();
        // Times grow with the index, so time order is the order written.
        assert!(back == records, "{sampler:?}: the samples read back differ");
    }
}

#[test]
fn open_blocks_can_be_written_early_and_more_records_follow() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    enc.records(&samples(10)).expect("valid");
    assert_eq!(enc.record_bytes(), 0, "both CPUs' blocks are still open");
    enc.write_open_blocks().expect("vec");
    assert_eq!(enc.chunk_count(), 2);
    let written = enc.record_bytes();
    assert!(written > 0);
    enc.write_open_blocks().expect("nothing left to write");
    assert_eq!(enc.record_bytes(), written);
    enc.records(&samples(10)).expect("valid");
    let profile = Profile::from_vec(enc.finish(&stop()).expect("vec")).expect("valid");
    assert_eq!(profile.chunk_count(), 4);
    assert_eq!(profile.validate().expect("records"), 20);
}
