//! The profile reader and writer on synthetic files: round trips, every structural error, and
//! bounded memory.

mod support;
use support::sections_of;

use dprof_abi::{Alloc, Lost, Record};

use dprof_fixtures::profile::{encode_record, example_header, example_profile, EXAMPLE_KALLSYMS};
use dprof_format::*;

/// A version 1 file (records in Records sections, whole) from raw (kind, payload) sections,
/// each with a correct CRC: the structural checks are the same in both versions.
fn build(sections: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for (kind, payload) in sections {
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// The example profile as the version 1 writer wrote it (`example_profile()` before version
/// 2): the structural tests of Records sections run on it.
fn v1_example() -> Vec<u8> {
    include_bytes!("data/v1-example.dprof").to_vec()
}

fn header_json() -> Vec<u8> {
    serde_json::to_vec(&example_header()).expect("serializes")
}

fn stop_json() -> Vec<u8> {
    serde_json::to_vec(&StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 1,
        elapsed_ns: 2,
        device: None,
    })
    .expect("serializes")
}

fn end(records: u64, bytes: u64, chunks: u64) -> Vec<u8> {
    [records, bytes, chunks]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

fn alloc_record(cpu: u32) -> Vec<u8> {
    encode_record(cpu, 10, &Record::Alloc(Alloc::default()))
}

/// Header, Kallsyms, Modules, the given Records chunks, Stop, and a matching End.
fn with_chunks(chunks: &[Vec<u8>]) -> Vec<(u32, Vec<u8>)> {
    let mut sections = vec![(1, header_json()), (2, Vec::new()), (3, Vec::new())];
    for c in chunks {
        sections.push((4, c.clone()));
    }
    sections.push((6, stop_json()));
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    // The tests' chunks hold 64-byte Alloc records.
    let records = bytes / alloc_record(0).len();
    sections.push((5, end(records as u64, bytes as u64, chunks.len() as u64)));
    sections
}

/// The error of opening `bytes`, which must be refused at open.
fn error_of(bytes: &[u8]) -> ProfileError {
    Profile::from_bytes(bytes).expect_err("must be refused at open")
}

/// The error of reading the records of `bytes`, which must open: open does not read them.
fn records_error_of(bytes: &[u8]) -> ProfileError {
    Profile::from_bytes(bytes)
        .expect("opens: the records are checked as they are read")
        .validate()
        .expect_err("the records must be refused")
}

/// The error of opening `bytes` or, when they open, of reading their records.
fn any_error_of(bytes: &[u8]) -> ProfileError {
    match Profile::from_bytes(bytes) {
        Err(e) => e,
        Ok(profile) => profile.validate().expect_err("must be refused"),
    }
}

/// Header offset and payload length of the Records sections of a whole file.
fn chunks_of(bytes: &[u8]) -> Vec<(usize, usize)> {
    sections_of(bytes)
        .into_iter()
        .filter(|&(kind, _, _)| kind == SectionKind::Records as u32)
        .map(|(_, at, len)| (at, len))
        .collect()
}

#[test]
fn headers_from_before_sampling_still_load() {
    let mut json = serde_json::to_value(example_header()).expect("json");
    let header = json.as_object_mut().expect("object");
    header.remove("proc_version");
    header.remove("build_id");
    header["config"]
        .as_object_mut()
        .expect("object")
        .remove("sampling");
    let old: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert_eq!(old.proc_version, None);
    assert_eq!(old.build_id, None);
    assert_eq!(old.config.sampling, None);
}

/// Causal tables of code units round trip; a table of types writes no unit, scope or module
/// lists, so a profile of types reads as before, and one written before units existed reads
/// as types.
#[test]
fn causal_units_round_trip_and_old_tables_are_types() {
    use dprof_fixtures::causal;
    let mut header = example_header();
    header.config.causal = Some(causal::modules_config());
    let json = serde_json::to_value(&header).expect("json");
    let back: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert_eq!(back, header);
    let functions = causal::functions_config();
    let json = serde_json::to_value(&functions).expect("json");
    assert_eq!(json["types"][2]["unit"], "function");
    assert_eq!(json["types"][2]["module"], "ext4");
    assert_eq!(json["scope"][2], "[ext4]");
    assert_eq!(functions.types[2].label(), "ext4_da_write_begin [ext4]");
    let types = serde_json::to_value(causal::example_config()).expect("json");
    assert!(types.get("scope").is_none(), "{types}");
    for key in ["unit", "module", "functions", "functions_left_out"] {
        assert!(types["types"][0].get(key).is_none(), "{key}: {types}");
    }
    let old: dprof_format::CausalCollectConfig = serde_json::from_value(types).expect("loads");
    assert_eq!(old.types[0].unit, CausalUnit::Type);
    assert_eq!(old, causal::example_config());
}

/// The delay accounting round trips; a causal configuration written before the choice reads
/// as per CPU, which every module before it did.
#[test]
fn delay_accounting_round_trips_and_old_configurations_are_per_cpu() {
    let mut config = dprof_fixtures::causal::example_config();
    for accounting in [DelayAccounting::Task, DelayAccounting::Cpu] {
        config.delay_accounting = accounting;
        let json = serde_json::to_value(&config).expect("json");
        let back: CausalCollectConfig = serde_json::from_value(json).expect("loads");
        assert_eq!(back.delay_accounting, accounting);
    }
    let mut json = serde_json::to_value(&config).expect("json");
    assert_eq!(json["delay_accounting"], "cpu");
    json.as_object_mut()
        .expect("object")
        .remove("delay_accounting");
    let old: CausalCollectConfig = serde_json::from_value(json).expect("loads");
    assert_eq!(old.delay_accounting, DelayAccounting::Cpu);
}

#[test]
fn merged_caches_round_trip_and_are_optional() {
    let mut header = example_header();
    header.merged_caches = vec![MergedCache {
        pool: ":0000192".to_owned(),
        aliases: vec!["file_lock_cache".to_owned(), "rtable".to_owned()],
    }];
    let json = serde_json::to_value(&header).expect("json");
    let back: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert_eq!(back, header);
    // Nothing merged writes nothing, so older readers see the header they know.
    let json = serde_json::to_value(example_header()).expect("json");
    assert!(json.get("merged_caches").is_none());
    let old: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert!(old.merged_caches.is_empty());
}

#[test]
fn kernel_image_sections_round_trip_and_are_optional() {
    let mut header = example_header();
    header.kernel_image = vec![ImageSection {
        kind: ImageSectionKind::Bss,
        start: 0xffff_ffff_8392_8000,
        end: 0xffff_ffff_83a5_a000,
    }];
    let json = serde_json::to_value(&header).expect("json");
    assert_eq!(json["kernel_image"][0]["kind"], "bss");
    let back: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert_eq!(back, header);
    let json = serde_json::to_value(example_header()).expect("json");
    assert!(json.get("kernel_image").is_none());
    let old: ProfileHeader = serde_json::from_value(json).expect("loads");
    assert!(old.kernel_image.is_empty());
}

#[test]
fn example_round_trips() {
    let profile = Profile::from_vec(v1_example()).expect("valid");
    // The file was written by a collector of ABI version 5.
    let mut header = example_header();
    header.module.abi_version = 5;
    assert_eq!(profile.header(), &header);
    assert_eq!(profile.kallsyms(), EXAMPLE_KALLSYMS.as_bytes());
    assert_eq!(profile.record_count(), 14);
    assert_eq!(profile.chunk_count(), 2);
    assert_eq!(
        profile.stop().reason,
        StopReason::CommandExited { status: 0 }
    );
    let records: Vec<_> = profile
        .records()
        .collect::<Result<_, _>>()
        .expect("valid records");
    assert_eq!(records.len(), 14);
    assert_eq!(profile.validate().expect("valid records"), 14);
    assert_eq!(records[6].0.cpu, 3);
    assert!(matches!(records[8].1, Record::Lost(Lost { count: 7 })));
    assert!(matches!(records[11].1, Record::AccessSample(s) if s.pid == 1000));
    let times: Vec<u64> = records.iter().map(|(h, _)| h.time_ns).collect();
    assert!(times.is_sorted(), "file order is the order written");
    let mut infos = std::collections::BTreeMap::new();
    for (_, record) in &records {
        if let Record::CacheInfo(info) = record {
            infos.entry(info.cache).or_insert(*info);
        }
    }
    assert_eq!(infos.len(), 3);
    assert_eq!(
        infos
            .get(&0xffff_8880_0300_0000)
            .map(dprof_abi::CacheInfo::name_bytes),
        Some(&b"skbuff_head_cache"[..])
    );
}

#[test]
fn every_prefix_is_refused_as_truncated() {
    let bytes = example_profile();
    for n in 0..bytes.len() {
        let err = error_of(&bytes[..n]);
        assert!(
            matches!(
                err,
                ProfileError::TruncatedFileHeader { .. }
                    | ProfileError::TruncatedSectionHeader { .. }
                    | ProfileError::TruncatedSection { .. }
                    | ProfileError::MissingEnd { .. }
            ),
            "prefix of {n} bytes: {err}"
        );
        assert_eq!(err.offset(), Some(n as u64), "prefix of {n} bytes: {err}");
    }
}

#[test]
fn every_flipped_byte_is_refused() {
    let bytes = example_profile();
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x5a;
        let err = any_error_of(&bad);
        assert!(err.offset().is_some(), "byte {i}: {err}");
    }
}

#[test]
fn truncation_message_names_section_and_offset() {
    let bytes = v1_example();
    let profile = Profile::from_bytes(&bytes).expect("valid");
    // Cut in the middle of the first Records section.
    let kallsyms_len = profile.kallsyms().len();
    let records_at = bytes
        .windows(4)
        .enumerate()
        .skip(FILE_HEADER_SIZE + kallsyms_len)
        .find(|(_, w)| *w == 4u32.to_le_bytes())
        .map(|(i, _)| i)
        .expect("a Records section");
    let cut = records_at + SECTION_HEADER_SIZE + 40;
    let err = error_of(&bytes[..cut]);
    let declared = u64::from_le_bytes(
        bytes[records_at + 8..records_at + 16]
            .try_into()
            .expect("8"),
    );
    assert_eq!(
        err.to_string(),
        format!(
            "file ends at offset {cut} inside a Records section that declares {declared} bytes: \
             the profile is truncated (the collector did not finish)"
        )
    );
}

#[test]
fn foreign_magic() {
    let err = error_of(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    assert_eq!(
        err.to_string(),
        "not a dprof profile: bad magic at offset 0"
    );
    assert_eq!(
        error_of(b"PK").to_string(),
        "not a dprof profile: bad magic at offset 0"
    );
}

#[test]
fn text_mode_transfer_is_caught_by_the_magic() {
    let mut bytes = example_profile();
    bytes.splice(6..8, *b"\n");
    assert!(matches!(
        error_of(&bytes),
        ProfileError::BadMagic { offset: 0 }
    ));
}

#[test]
fn newer_version_is_refused() {
    let mut bytes = example_profile();
    bytes[8] = 5;
    assert_eq!(
        error_of(&bytes).to_string(),
        "format version 5 at offset 8 is not supported: this dprof reads versions 1 to 4 (was \
         the profile written by a newer dprof?)"
    );
}

#[test]
fn missing_end() {
    let mut sections = with_chunks(&[alloc_record(0)]);
    sections.pop();
    let bytes = build(&sections);
    let err = error_of(&bytes);
    assert_eq!(
        err.to_string(),
        format!(
            "no End section: the profile is incomplete (was the collector interrupted?); the \
             file ends at offset {}",
            bytes.len()
        )
    );
}

#[test]
fn unknown_section() {
    let mut sections = with_chunks(&[]);
    sections.insert(3, (77, b"future".to_vec()));
    let bytes = build(&sections);
    let err = error_of(&bytes);
    assert!(
        matches!(err, ProfileError::UnknownSection { kind: 77, .. }),
        "{err}"
    );
    assert!(err
        .to_string()
        .contains("unknown kind 77: the file was written by a newer dprof"));
}

#[test]
fn crc_mismatch() {
    let mut bytes = build(&with_chunks(&[alloc_record(0)]));
    let len = bytes.len();
    // The record's time field, inside the Records payload, well before Stop and End.
    let records_payload = bytes
        .windows(alloc_record(0).len())
        .position(|w| w == alloc_record(0).as_slice())
        .expect("record in file");
    bytes[records_payload + 8] ^= 1;
    let err = records_error_of(&bytes);
    assert!(
        matches!(
            err,
            ProfileError::Checksum {
                kind: SectionKind::Records,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.offset(),
        Some((records_payload - SECTION_HEADER_SIZE) as u64)
    );
    assert!(len > 0);
}

#[test]
fn unknown_record_kind_with_valid_crc() {
    let mut record = alloc_record(0);
    record[0] = 77;
    let bytes = build(&with_chunks(&[record]));
    let err = records_error_of(&bytes);
    let at = err.offset().expect("offset");
    assert_eq!(
        err.to_string(),
        format!("record at offset {at}: unknown record kind 77")
    );
}

#[test]
fn straddling_record() {
    let record = alloc_record(0);
    let (a, b) = record.split_at(24);
    let bytes = build(&with_chunks(&[a.to_vec(), b.to_vec()]));
    let err = records_error_of(&bytes);
    assert!(
        err.to_string().ends_with(
            "it needs 64 bytes but only 24 remain in its chunk (records must not straddle chunks)"
        ),
        "{err}"
    );
    let (a, b) = record.split_at(8);
    let err = records_error_of(&build(&with_chunks(&[a.to_vec(), b.to_vec()])));
    assert!(
        err.to_string().contains("needs 16 bytes but only 8 remain"),
        "{err}"
    );
}

#[test]
fn record_cpu_out_of_range() {
    let bytes = build(&with_chunks(&[alloc_record(4)]));
    let err = records_error_of(&bytes);
    assert!(
        err.to_string()
            .ends_with("cpu 4 is not below the module's nr_cpu_ids 4"),
        "{err}"
    );
}

#[test]
fn end_counts_must_match() {
    let mut sections = with_chunks(&[alloc_record(0)]);
    let last = sections.len() - 1;
    sections[last].1 = end(2, 64, 1);
    // The record count is only known once the records are read.
    let err = records_error_of(&build(&sections));
    assert!(
        err.to_string()
            .ends_with("declares 2 records but the file holds 1: the profile is inconsistent"),
        "{err}"
    );
    sections[last].1 = end(1, 64, 1);
    let profile = Profile::from_bytes(&build(&sections)).expect("valid");
    assert_eq!(profile.validate().expect("valid records"), 1);
    sections[last].1 = end(1, 65, 1);
    assert!(matches!(
        error_of(&build(&sections)),
        ProfileError::EndMismatch {
            what: "bytes of records",
            ..
        }
    ));
    sections[last].1 = end(1, 64, 2);
    assert!(matches!(
        error_of(&build(&sections)),
        ProfileError::EndMismatch {
            what: "Records sections",
            ..
        }
    ));
    sections[last].1 = vec![0; 8];
    assert!(matches!(
        error_of(&build(&sections)),
        ProfileError::BadEndSize { .. }
    ));
}

#[test]
fn sections_out_of_order() {
    let mut sections = with_chunks(&[]);
    sections.swap(1, 2);
    let err = error_of(&build(&sections));
    assert!(
        err.to_string().starts_with("Modules section at offset"),
        "{err}"
    );
    let mut sections = with_chunks(&[alloc_record(0)]);
    sections.insert(sections.len() - 1, (4, alloc_record(0)));
    let err = error_of(&build(&sections));
    assert!(
        err.to_string()
            .contains("only the End section may follow the Stop section"),
        "{err}"
    );
    let mut sections = with_chunks(&[]);
    sections.remove(0);
    let err = error_of(&build(&sections));
    assert!(
        err.to_string()
            .contains("a profile starts with its Header section"),
        "{err}"
    );
    let mut sections = with_chunks(&[]);
    sections.insert(3, (1, header_json()));
    let err = error_of(&build(&sections));
    assert!(err.to_string().contains("already has one"), "{err}");
    let mut sections = with_chunks(&[]);
    sections.remove(3);
    let err = error_of(&build(&sections));
    assert!(
        err.to_string().contains("Stop section must come before"),
        "{err}"
    );
}

#[test]
fn trailing_bytes_after_end() {
    let mut bytes = example_profile();
    let len = bytes.len();
    bytes.extend_from_slice(b"junk");
    let err = error_of(&bytes);
    assert_eq!(
        err.to_string(),
        format!("4 bytes follow the End section at offset {len}: the file is not one profile")
    );
}

#[test]
fn bad_header_json() {
    let mut sections = with_chunks(&[]);
    sections[0].1 = b"{\"dprof_version\": 1}".to_vec();
    let err = error_of(&build(&sections));
    assert_eq!(
        err.offset(),
        Some((FILE_HEADER_SIZE + SECTION_HEADER_SIZE) as u64)
    );
    assert!(
        err.to_string()
            .starts_with("Header section at offset 32 is not valid for this dprof: "),
        "{err}"
    );
}

#[test]
fn huge_declared_lengths_do_not_allocate() {
    let mut bytes = build(&[]);
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&u64::MAX.to_le_bytes());
    let err = error_of(&bytes);
    assert!(
        matches!(
            err,
            ProfileError::TruncatedSection {
                declared: u64::MAX,
                ..
            }
        ),
        "{err}"
    );
    let mut bytes = build(&with_chunks(&[])[..3]);
    bytes.extend_from_slice(&4u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(
        error_of(&bytes),
        ProfileError::ChunkTooLarge { .. }
    ));
}

#[test]
fn encoder_refuses_bad_records_and_writes_nothing() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    let mut bad = alloc_record(0);
    bad.extend_from_slice(&alloc_record(0)[..20]);
    let err = enc.records(&bad).expect_err("cut record");
    assert_eq!(
        err.to_string(),
        "the device returned a bad record at byte 64 of a 84-byte read: it needs 64 bytes but \
         only 20 remain in its chunk (records must not straddle chunks) (do the module and \
         dprof agree on the ABI?)"
    );
    assert_eq!(enc.record_count(), 0);
    assert_eq!(enc.chunk_count(), 0);
}

/// `n` allocations on `cpu`, each at its own address and time, as one read.
fn allocs(cpu: u32, n: usize) -> Vec<u8> {
    (0..n as u64)
        .flat_map(|i| {
            let alloc = Alloc {
                ptr: 0xffff_8880_0400_0000 + i * 256,
                call_site: 0xffff_ffff_8120_0042 + (i % 7) * 0x40,
                cache: 0xffff_8880_0300_0000,
                bytes_req: 200,
                bytes_alloc: 256,
                ..Alloc::default()
            };
            dprof_fixtures::profile::encode_record(cpu, 1_000 + i * 997, &Record::Alloc(alloc))
        })
        .collect()
}

#[test]
fn encoder_writes_a_cpus_block_when_it_is_full() {
    let mut enc = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("vec");
    let n = 40_000;
    enc.records(&allocs(1, n)).expect("valid");
    enc.records(&allocs(2, 10)).expect("valid");
    enc.records(&[]).expect("nothing");
    let full = enc.chunk_count();
    assert!(full >= 2, "{full} blocks written for CPU 1 before the end");
    assert_eq!(enc.record_count(), n as u64 + 10);
    let bytes = enc
        .finish(&StopInfo {
            reason: StopReason::DurationElapsed,
            ended_unix_s: 0,
            elapsed_ns: 0,
            device: None,
        })
        .expect("vec");
    let profile = Profile::from_bytes(&bytes).expect("valid");
    // The partly filled blocks of both CPUs are written at the end.
    assert_eq!(profile.chunk_count(), full + 2);
    assert_eq!(profile.record_count(), n as u64 + 10);
    assert_eq!(profile.validate().expect("valid records"), n as u64 + 10);
    let blocks: Vec<(usize, usize)> = sections_of(&bytes)
        .into_iter()
        .filter(|s| s.0 == SectionKind::Block as u32)
        .map(|s| (s.1, s.2))
        .collect();
    assert!(blocks[..full as usize]
        .iter()
        .all(|&(_, len)| (WRITTEN_BLOCK..WRITTEN_BLOCK + 1024).contains(&len)));
}

#[test]
fn writer_renames_only_when_finished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.dprof");
    let partial = partial_path(&path);
    assert_eq!(partial, dir.path().join("out.dprof.partial"));

    let mut w = ProfileWriter::create(&path, &example_header(), b"k", b"m").expect("create");
    w.write_records(&alloc_record(2)).expect("write");
    assert!(partial.exists() && !path.exists());
    let final_path = w
        .finish(&StopInfo {
            reason: StopReason::Interrupted { signal: 2 },
            ended_unix_s: 0,
            elapsed_ns: 0,
            device: None,
        })
        .expect("finish");
    assert_eq!(final_path, path);
    assert!(path.exists() && !partial.exists());
    let profile = Profile::open(&path).expect("valid");
    assert_eq!(profile.record_count(), 1);
    assert_eq!(profile.validate().expect("valid records"), 1);
    assert_eq!(profile.modules(), b"m");
    assert_eq!(
        profile.stop().reason.to_string(),
        "interrupted by signal 2 (SIGINT)"
    );
}

#[test]
fn dropped_writer_leaves_an_unreadable_partial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.dprof");
    let mut w = ProfileWriter::create(&path, &example_header(), b"", b"").expect("create");
    w.write_records(&alloc_record(0)).expect("write");
    drop(w);
    assert!(!path.exists());
    let partial = partial_path(&path);
    // Even renamed by hand it does not read as complete.
    std::fs::rename(&partial, &path).expect("rename");
    let err = Profile::open(&path).expect_err("incomplete");
    assert!(matches!(err, ProfileError::MissingEnd { .. }), "{err}");
}

#[test]
fn abandon_removes_the_partial() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.dprof");
    let w = ProfileWriter::create(&path, &example_header(), b"", b"").expect("create");
    w.abandon().expect("remove");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn open_missing_file() {
    let err = Profile::open(std::path::Path::new("/nonexistent/x.dprof")).expect_err("missing");
    assert!(
        err.to_string()
            .starts_with("cannot read /nonexistent/x.dprof"),
        "{err}"
    );
    assert_eq!(err.offset(), None);
}

#[test]
fn crc_error_in_the_second_chunk_comes_from_the_iterator() {
    let mut bytes = build(&with_chunks(&[alloc_record(0), alloc_record(1)]));
    let chunks = chunks_of(&bytes);
    assert_eq!(chunks.len(), 2);
    let (second, _) = chunks[1];
    bytes[second + SECTION_HEADER_SIZE + 20] ^= 0x08;
    let profile = Profile::from_bytes(&bytes).expect("opens: open does not read records");
    let mut records = profile.records();
    let (first, _) = records
        .next()
        .expect("an item")
        .expect("the first chunk is fine");
    assert_eq!(first.cpu, 0);
    let err = records.next().expect("an item").expect_err("corrupt chunk");
    assert!(
        matches!(
            err,
            ProfileError::Checksum {
                kind: SectionKind::Records,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.offset(), Some(second as u64));
    assert!(
        err.to_string()
            .starts_with(&format!("Records section at offset {second} is corrupt: ")),
        "{err}"
    );
    // The error comes once and ends the iteration.
    assert!(records.next().is_none());
    assert!(records.next().is_none());
}

#[test]
fn record_count_mismatch_comes_at_the_end_of_the_records() {
    let mut sections = with_chunks(&[alloc_record(0), alloc_record(1)]);
    let last = sections.len() - 1;
    sections[last].1 = end(3, 128, 2);
    let bytes = build(&sections);
    let end_payload = bytes.len() - END_SIZE;
    let profile = Profile::from_bytes(&bytes).expect("opens: the count needs the records");
    assert_eq!(
        profile.record_count(),
        3,
        "as declared, until the records are read"
    );
    let items: Vec<_> = profile.records().collect();
    assert_eq!(items.len(), 3);
    assert!(items[0].is_ok() && items[1].is_ok());
    let Err(err) = &items[2] else {
        panic!("the count is checked at the end")
    };
    assert!(
        matches!(
            err,
            ProfileError::EndMismatch {
                what: "records",
                declared: 3,
                found: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.offset(), Some(end_payload as u64));
    assert_eq!(
        err.to_string(),
        format!(
            "End section at offset {end_payload} declares 3 records but the file holds 2: the \
             profile is inconsistent"
        )
    );
}

#[test]
fn a_file_cut_inside_a_records_chunk_fails_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = v1_example();
    let (second, len) = chunks_of(&bytes)[1];
    let cut = second + SECTION_HEADER_SIZE + len / 2;
    let path = dir.path().join("cut.dprof");
    std::fs::write(&path, &bytes[..cut]).expect("write");
    let err = Profile::open(&path).expect_err("truncated");
    assert!(
        matches!(
            err,
            ProfileError::TruncatedSection {
                kind: SectionKind::Records,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.offset(), Some(cut as u64));
}

#[test]
fn open_does_not_read_the_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = v1_example();
    // Both chunks: one with a wrong CRC, one with a bad record under a right CRC.
    let chunks = chunks_of(&bytes);
    let (first, _) = chunks[0];
    bytes[first + SECTION_HEADER_SIZE] = 77;
    let (second, second_len) = chunks[1];
    let payload = second + SECTION_HEADER_SIZE..second + SECTION_HEADER_SIZE + second_len;
    bytes[payload.start] = 77;
    let crc = crc32fast::hash(&bytes[payload]);
    bytes[second + 4..second + 8].copy_from_slice(&crc.to_le_bytes());
    let path = dir.path().join("bad-records.dprof");
    std::fs::write(&path, &bytes).expect("write");
    let profile = Profile::open(&path).expect("opens: only the section headers are read");
    assert_eq!(profile.record_count(), 14);
    assert_eq!(profile.chunk_count(), 2);
    assert_eq!(profile.file_size(), bytes.len() as u64);
    let err = profile.validate().expect_err("the first chunk's CRC");
    assert!(
        matches!(err, ProfileError::Checksum { offset, .. } if offset == first as u64),
        "{err}"
    );
}

#[test]
fn a_bad_record_under_a_right_crc_names_its_offset() {
    let bytes = v1_example();
    let mut bad = bytes.clone();
    let (second, second_len) = chunks_of(&bytes)[1];
    let payload = second + SECTION_HEADER_SIZE..second + SECTION_HEADER_SIZE + second_len;
    // The second record of the chunk gets CPU 9 of 4.
    let at = payload.start
        + usize::from(u16::from_le_bytes([
            bad[payload.start + 2],
            bad[payload.start + 3],
        ]));
    bad[at + 4] = 9;
    let crc = crc32fast::hash(&bad[payload]);
    bad[second + 4..second + 8].copy_from_slice(&crc.to_le_bytes());
    let profile = Profile::from_bytes(&bad).expect("opens");
    let items: Vec<_> = profile.records().collect();
    let good = items.iter().take_while(|i| i.is_ok()).count();
    assert_eq!(items.len(), good + 1, "the error ends the iteration");
    let err = items[good].as_ref().expect_err("bad record");
    assert_eq!(err.offset(), Some(at as u64));
    assert_eq!(
        err.to_string(),
        format!("record at offset {at}: cpu 9 is not below the module's nr_cpu_ids 4")
    );
}

#[test]
fn reading_a_file_holds_one_block_per_cpu_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.dprof");
    let mut w = ProfileWriter::create(&path, &example_header(), b"k", b"m").expect("create");
    let n = 60_000;
    for cpu in 0..3 {
        w.write_records(&allocs(cpu, n)).expect("valid");
    }
    w.finish(&StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 0,
        elapsed_ns: 0,
        device: None,
    })
    .expect("finish");
    let profile = Profile::open(&path).expect("valid");
    assert!(profile.chunk_count() >= 6, "{}", profile.chunk_count());
    let mut records = profile.records();
    let mut count = 0;
    let mut most = 0;
    let mut last_time = 0;
    while let Some(item) = records.next() {
        let (header, _) = item.expect("valid record");
        assert!(header.time_ns >= last_time, "time order across CPUs");
        last_time = header.time_ns;
        count += 1;
        most = most.max(records.buffer_capacity());
    }
    assert_eq!(count, 3 * n);
    assert!(
        most <= 3 * (WRITTEN_BLOCK + 1024),
        "the iterator held {most} bytes"
    );
}

#[test]
fn reading_a_version_1_file_holds_one_chunk_at_a_time() {
    let profile = Profile::from_vec(v1_example()).expect("valid");
    let mut records = profile.records();
    let mut most = 0;
    while let Some(item) = records.next() {
        item.expect("valid record");
        most = most.max(records.buffer_capacity());
    }
    assert!(most <= WRITTEN_RECORDS_CHUNK + SECTION_HEADER_SIZE);
}

#[test]
fn a_file_cut_after_open_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shrinks.dprof");
    let bytes = v1_example();
    std::fs::write(&path, &bytes).expect("write");
    let profile = Profile::open(&path).expect("valid");
    let (second, _) = chunks_of(&bytes)[1];
    std::fs::write(&path, &bytes[..second + 20]).expect("cut");
    let items: Vec<_> = profile.records().collect();
    let err = items
        .last()
        .expect("items")
        .as_ref()
        .expect_err("the cut shows");
    assert!(matches!(err, ProfileError::Io { .. }), "{err}");
}

fn example_text() -> KernelText {
    let mut text = KernelText::new();
    text.insert(0xffff_ffff_8100_0010, &[0x55, 0x48, 0x89, 0xe5]);
    text.insert(0xffff_ffff_c000_0000, &[0xc3; 11]);
    text
}

#[test]
fn text_section_round_trips_through_the_writer() {
    let text = example_text();
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("header");
    encoder.records(&alloc_record(0)).expect("records");
    let stop: StopInfo = serde_json::from_slice(&stop_json()).expect("stop");
    let bytes = encoder.finish_with_text(&stop, &text).expect("finish");
    let profile = Profile::from_vec(bytes).expect("opens");
    assert_eq!(profile.text(), &text);
    assert_eq!(profile.validate().expect("records"), 1);
    assert_eq!(
        profile.text().bytes_at(0xffff_ffff_8100_0011, 3),
        Some(&[0x48, 0x89, 0xe5][..])
    );
    assert_eq!(profile.text().bytes_at(0xffff_ffff_8100_0011, 4), None);
    assert_eq!(profile.text().bytes_at(0xffff_ffff_8100_000f, 1), None);
    // A profile without one reads as having no code.
    let plain = Profile::from_vec(example_profile()).expect("opens");
    assert!(plain.text().is_empty());
}

#[test]
fn text_blocks_merge_when_they_overlap_or_touch() {
    let mut text = KernelText::new();
    text.insert(100, &[1, 2, 3]);
    text.insert(110, &[9]);
    text.insert(102, &[7, 4, 5]); // overlaps 100..103: the held byte 3 wins at 102
    text.insert(105, &[6]); // touches 100..105
    assert_eq!(text.len(), 2);
    assert_eq!(text.bytes_at(100, 6), Some(&[1, 2, 3, 4, 5, 6][..]));
    assert_eq!(text.block_containing(110), Some((110, &[9][..])));
    assert_eq!(text.block_containing(106), None);
    let back = KernelText::decode(&text.encode(), 0).expect("decodes");
    assert_eq!(back, text);
}

#[test]
fn bad_text_sections_are_refused_with_the_block_offset() {
    let good = example_text().encode();
    let with_text = |payload: Vec<u8>| {
        let mut sections = with_chunks(&[]);
        sections.insert(3, (7, payload));
        build(&sections)
    };
    assert!(Profile::from_vec(with_text(good.clone())).is_ok());
    let mut reserved = good.clone();
    reserved[12] = 1;
    let mut cut = good.clone();
    cut.truncate(18);
    let mut unsorted = example_text().encode();
    let second = 16 + 8; // the first block: header + 4 bytes padded to 8
    let (a, b) = unsorted.split_at(second);
    // The first block, moved behind the second, is the first out of order.
    let first_moved = b.len();
    unsorted = [b, a].concat();
    let mut padding = good.clone();
    padding[20] = 0xcc;
    let mut empty = good.clone();
    empty[8..12].copy_from_slice(&0u32.to_le_bytes());
    for (payload, reason, at) in [
        (reserved, "reserved word", 0),
        (cut, "runs past the end", 0),
        (unsorted, "not sorted", first_moved),
        (padding, "padding", 0),
        (empty, "empty", 0),
    ] {
        let err = error_of(&with_text(payload));
        assert!(err.to_string().contains(reason), "{err}");
        let section_payload = 16 + 3 * 16 + header_json().len() as u64 + 16;
        assert_eq!(err.offset(), Some(section_payload + at as u64), "{err}");
    }
    // One Text section at most, and never after Stop.
    let mut sections = with_chunks(&[]);
    sections.insert(3, (7, good.clone()));
    sections.insert(3, (7, good.clone()));
    let err = error_of(&build(&sections));
    assert!(
        err.to_string()
            .contains("Text section must be followed by the Stop"),
        "{err}"
    );
    let mut sections = with_chunks(&[]);
    sections.insert(4, (7, good));
    let err = error_of(&build(&sections));
    assert!(
        err.to_string().contains("only the End section may follow"),
        "{err}"
    );
}

fn example_owners() -> PageOwners {
    PageOwners {
        slabs: vec![SlabPages {
            first_object: 0xffff_8880_0123_4000,
            stride: 256,
            objects: 16,
            cache: "kmalloc-256".to_owned(),
        }],
        pages: vec![
            OwnedPage {
                page: 0xffff_8880_0200_0000,
                usage: PageUsage::PageCache,
            },
            OwnedPage {
                page: 0xffff_8880_0300_0000,
                usage: PageUsage::Anon,
            },
        ],
    }
}

#[test]
fn page_owners_round_trip_after_the_records_and_before_the_text() {
    let stop: StopInfo = serde_json::from_slice(&stop_json()).expect("stop");
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("new");
    encoder.records(&alloc_record(0)).expect("records");
    encoder.set_page_owners(example_owners());
    let bytes = encoder
        .finish_with_text(&stop, &example_text())
        .expect("finish");
    let kinds: Vec<u32> = sections_of(&bytes).iter().map(|s| s.0).collect();
    assert_eq!(kinds, [1, 2, 3, 10, 11, 7, 6, 5]);
    let profile = Profile::from_vec(bytes).expect("opens");
    assert_eq!(profile.page_owners(), &example_owners());
    assert_eq!(profile.text(), &example_text());
    assert_eq!(profile.validate().expect("records"), 1);
    // Nothing found, no section; a profile without one has no owners.
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("new");
    encoder.set_page_owners(PageOwners::default());
    let bytes = encoder.finish(&stop).expect("finish");
    assert!(!sections_of(&bytes).iter().any(|s| s.0 == 11));
    assert!(Profile::from_vec(bytes)
        .expect("opens")
        .page_owners()
        .is_empty());
}

#[test]
fn misplaced_or_bad_page_owners_are_refused() {
    let owners = serde_json::to_vec(&example_owners()).expect("json");
    // Two of them.
    let mut sections = with_chunks(&[]);
    sections.insert(3, (11, owners.clone()));
    sections.insert(3, (11, owners.clone()));
    let err = error_of(&build(&sections));
    assert!(
        err.to_string()
            .contains("PageOwners section must be followed by the Text or the Stop"),
        "{err}"
    );
    // After the Text section.
    let mut sections = with_chunks(&[]);
    sections.insert(3, (11, owners));
    sections.insert(3, (7, example_text().encode()));
    let err = error_of(&build(&sections));
    assert!(
        err.to_string()
            .contains("Text section must be followed by the Stop"),
        "{err}"
    );
    // Not the JSON of page owners.
    let mut sections = with_chunks(&[]);
    sections.insert(3, (11, br#"{"slabs":[{"first_object":"x"}]}"#.to_vec()));
    let err = error_of(&build(&sections));
    assert!(matches!(err, ProfileError::BadJson { .. }), "{err}");
}

/// Stands for the kernel's BTF: the format keeps the bytes as they are and never parses them.
const BTF: &[u8] = b"\x9f\xeb\x01\x00 not parsed by the format";

#[test]
fn btf_section_round_trips_through_the_encoder_and_the_writer() {
    let stop: StopInfo = serde_json::from_slice(&stop_json()).expect("stop");
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"k", b"m").expect("new");
    encoder.btf(BTF).expect("btf before records");
    encoder.records(&alloc_record(0)).expect("records");
    let bytes = encoder.finish(&stop).expect("finish");
    let kinds: Vec<u32> = sections_of(&bytes).iter().map(|s| s.0).collect();
    assert_eq!(kinds, [1, 2, 3, 8, 10, 6, 5], "Btf right after Modules");
    let profile = Profile::from_vec(bytes).expect("opens");
    assert_eq!(profile.btf(), Some(BTF));
    assert_eq!(profile.modules(), b"m");
    assert_eq!(
        profile.validate().expect("records after the Btf section"),
        1
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("btf.dprof");
    let mut w = ProfileWriter::create(&path, &example_header(), b"", b"").expect("create");
    w.write_btf(BTF).expect("btf");
    w.write_records(&alloc_record(1)).expect("records");
    let path = w.finish(&stop).expect("finish");
    let profile = Profile::open(&path).expect("opens");
    assert_eq!(profile.btf(), Some(BTF));
    assert_eq!(profile.validate().expect("records"), 1);
}

#[test]
fn profiles_without_a_btf_section_still_read() {
    let profile = Profile::from_vec(example_profile()).expect("opens");
    assert_eq!(profile.btf(), None);
    // A Btf section with no records after it, and an empty one, are fine too.
    let mut sections = with_chunks(&[]);
    sections.insert(3, (8, Vec::new()));
    let profile = Profile::from_vec(build(&sections)).expect("opens");
    assert_eq!(profile.btf(), Some(&[][..]));
}

#[test]
fn the_writer_refuses_a_btf_section_after_records_or_a_second_one() {
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("new");
    encoder.btf(BTF).expect("first");
    let err = encoder.btf(BTF).expect_err("second");
    assert_eq!(
        err.to_string(),
        "cannot write a Btf section now: the profile already has one"
    );
    let mut encoder = ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("new");
    encoder.records(&alloc_record(0)).expect("records");
    let err = encoder.btf(BTF).expect_err("after records");
    assert!(
        matches!(
            err,
            WriteError::MisplacedSection {
                kind: SectionKind::Btf,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "cannot write a Btf section now: it goes before the first records"
    );
    // Nothing was written by the refused call: the file still reads.
    let stop: StopInfo = serde_json::from_slice(&stop_json()).expect("stop");
    let profile = Profile::from_vec(encoder.finish(&stop).expect("finish")).expect("opens");
    assert_eq!(profile.btf(), None);
    assert_eq!(profile.validate().expect("records"), 1);

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("late.dprof");
    let mut w = ProfileWriter::create(&path, &example_header(), b"", b"").expect("create");
    w.write_records(&alloc_record(0)).expect("records");
    assert!(matches!(
        w.write_btf(BTF),
        Err(WriteError::MisplacedSection { .. })
    ));
}

#[test]
fn the_reader_refuses_a_second_or_misplaced_btf_section() {
    let btf_at = |places: &[usize]| {
        let mut sections = with_chunks(&[alloc_record(0)]);
        for &at in places.iter().rev() {
            sections.insert(at, (8, BTF.to_vec()));
        }
        build(&sections)
    };
    let ok = Profile::from_vec(btf_at(&[3])).expect("after Modules");
    assert_eq!(ok.btf(), Some(BTF));
    // (where the Btf sections go, which of them is refused, what the error says)
    for (places, refused, expected) in [
        (
            &[3, 3][..],
            1,
            "a profile has at most one Btf section, right after the Modules section",
        ),
        (
            &[4],
            0,
            "a profile has at most one Btf section, right after the Modules section",
        ),
        (
            &[1],
            0,
            "the Header section must be followed by the Kallsyms section",
        ),
        (
            &[2],
            0,
            "the Kallsyms section must be followed by the Modules section",
        ),
        (&[0], 0, "a profile starts with its Header section"),
    ] {
        let bytes = btf_at(places);
        let offset = sections_of(&bytes)
            .iter()
            .filter(|s| s.0 == SectionKind::Btf as u32)
            .nth(refused)
            .map(|s| s.1 as u64);
        let err = error_of(&bytes);
        assert!(
            matches!(
                err,
                ProfileError::MisplacedSection {
                    kind: SectionKind::Btf,
                    ..
                }
            ),
            "{places:?}: {err}"
        );
        assert_eq!(err.offset(), offset, "{places:?}: {err}");
        assert_eq!(
            err.to_string(),
            format!(
                "Btf section at offset {} is out of place: {expected}",
                offset.unwrap_or_default()
            )
        );
    }
    // After the Stop section, and after Text.
    let mut sections = with_chunks(&[]);
    sections.insert(4, (8, BTF.to_vec()));
    let err = error_of(&build(&sections));
    assert!(err.to_string().contains("at most one Btf section"), "{err}");
    let mut sections = with_chunks(&[]);
    sections.insert(3, (7, example_text().encode()));
    sections.insert(4, (8, BTF.to_vec()));
    let err = error_of(&build(&sections));
    assert!(err.to_string().contains("at most one Btf section"), "{err}");
}

#[test]
fn a_corrupt_btf_section_is_refused_at_open() {
    let mut sections = with_chunks(&[]);
    sections.insert(3, (8, BTF.to_vec()));
    let mut bytes = build(&sections);
    let btf_at = 16 + 3 * 16 + header_json().len();
    bytes[btf_at + 16 + 3] ^= 0x40;
    let err = error_of(&bytes);
    assert!(
        matches!(
            err,
            ProfileError::Checksum {
                kind: SectionKind::Btf,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.offset(), Some(btf_at as u64));
    bytes.truncate(btf_at + 20);
    assert!(matches!(
        error_of(&bytes),
        ProfileError::TruncatedSection {
            kind: SectionKind::Btf,
            ..
        }
    ));
}
