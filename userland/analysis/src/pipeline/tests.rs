use dprof_abi::{Alloc, Free, Lost, Record, ALLOC_KMALLOC};

use super::*;
use dprof_fixtures::data_profile::{self as example, gs_base, LOAD_RDI_8, RSP};
use dprof_fixtures::profile::software_sample;
use dprof_format::Profile;
use dprof_model::TypeProfile;

fn report_of(bytes: Vec<u8>, options: &Options) -> Report {
    let profile = Profile::from_vec(bytes).expect("valid profile");
    analyze(&profile, options).expect("valid records")
}

/// Progress starts at 0 of the profile's declared total and ends at it.
#[test]
fn progress_ends_at_the_record_count() {
    let profile = Profile::from_vec(example::profile()).expect("valid profile");
    let symbols = crate::symbols::Kallsyms::parse(profile.kallsyms());
    let mut seen = Vec::new();
    let report = analyze_with_progress(&profile, &symbols, &Options::default(), &mut |p| {
        seen.push(p);
    })
    .expect("valid records");
    let total = profile.record_count();
    let at = |records_done| Progress {
        records_done,
        records_total: total,
    };
    assert_eq!(seen, [at(0), at(total)]);
    assert_eq!(
        report,
        analyze(&profile, &Options::default()).expect("valid")
    );
}

/// The records are read as they are analyzed: a corrupt chunk is an error, not a report of
/// the records before it.
#[test]
fn a_corrupt_chunk_is_an_error_not_a_report() {
    let mut bytes = example::profile();
    // The end of the last Records section's payload: the last byte of the last record.
    let mut pos = dprof_format::FILE_HEADER_SIZE;
    let mut last_records_end = 0;
    while pos < bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4"));
        let len = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().expect("8")) as usize;
        pos += dprof_format::SECTION_HEADER_SIZE + len;
        if kind == dprof_format::SectionKind::Block as u32 {
            last_records_end = pos;
        }
    }
    bytes[last_records_end - 1] ^= 0x40;
    let profile = Profile::from_vec(bytes).expect("opens: the records are not read yet");
    let err = analyze(&profile, &Options::default()).expect_err("corrupt chunk");
    assert!(
        matches!(
            err,
            dprof_format::ProfileError::Checksum {
                kind: dprof_format::SectionKind::Block,
                ..
            }
        ),
        "{err}"
    );
}

/// The report with the miss classification and working-set views.
fn views_of(bytes: Vec<u8>) -> Report {
    let profile = Profile::from_vec(bytes).expect("valid profile");
    let symbols = crate::symbols::Kallsyms::parse(profile.kallsyms());
    let views = crate::views::ViewOptions::default();
    analyze_views(&profile, &symbols, &Options::default(), &views, &mut |_| {})
        .expect("valid records")
}

fn example_report() -> Report {
    report_of(example::profile(), &Options::default())
}

fn ty<'r>(r: &'r Report, name: &str) -> &'r TypeProfile {
    r.find_type(name)
        .unwrap_or_else(|| panic!("no type {name} in {:?}", names(r)))
}

fn names(r: &Report) -> Vec<&str> {
    r.data_profile
        .types
        .iter()
        .map(|t| t.name.as_str())
        .collect()
}

#[test]
fn every_sample_lands_in_one_bucket() {
    let r = example_report();
    let c = &r.coverage;
    assert_eq!(c.total_samples, 26);
    let expected = [
        (Bucket::Slab, 13),
        (Bucket::Global, 1),
        (Bucket::Percpu, 3),
        (Bucket::Stack, 1),
        (Bucket::UnknownAddress, 2),
        (Bucket::UserMode, 1),
        (Bucket::NoMemoryOperand, 1),
        (Bucket::MultipleMemoryOperands, 1),
        (Bucket::AddressOnly, 1),
        (Bucket::Undecodable, 1),
        (Bucket::NoBytes, 1),
        (Bucket::UnsupportedSegment, 0),
    ];
    for (bucket, n) in expected {
        assert_eq!(c.count(bucket), n, "{bucket:?}");
    }
    assert_eq!(c.buckets.iter().map(|b| b.samples).sum::<u64>(), 26);
    assert_eq!(c.resolved_samples, 18);
    assert_eq!(r.data_profile.resolved_samples, 18);
    let type_samples: u64 = r.data_profile.types.iter().map(|t| t.samples).sum();
    assert_eq!(type_samples, 18, "resolved samples are the types' samples");
    assert!(c
        .summary
        .starts_with("26 samples: 18 resolved (69.2%): slab 50.0%"));
}

#[test]
fn types_are_ranked_by_samples() {
    let r = example_report();
    assert_eq!(
        names(&r),
        [
            "skbuff_head_cache",
            "task_struct",
            "percpu:runqueues",
            "kmalloc-large@do_sys_poll",
            "kmalloc-1k@__alloc_skb",
            "kmalloc-1k@alloc_pipe_info",
            "global:jiffies",
            "stack",
        ]
    );
    let ranks: Vec<usize> = r.data_profile.types.iter().map(|t| t.rank).collect();
    assert_eq!(ranks, (1..=8).collect::<Vec<_>>());
    assert!((ty(&r, "skbuff_head_cache").share - 7.0 / 18.0).abs() < 1e-12);
}

#[test]
fn bounce_needs_two_cpus_in_one_lifetime() {
    let r = example_report();
    let skb = ty(&r, "skbuff_head_cache");
    // SKB_A: CPUs 0 and 1; first SKB_B: CPUs 0 and 1 (the CPU 1 sample at t=4500 comes
    // after the free at t=5000 in the file); second SKB_B: CPU 1 only.
    assert_eq!((skb.objects, skb.bounced_objects, skb.bounce), (3, 2, true));
    let task = ty(&r, "task_struct");
    assert_eq!(
        (task.objects, task.bounced_objects, task.bounce),
        (1, 0, false)
    );
    // CPU 2 read CPU 1's runqueues: a remote per-CPU access bounces that copy.
    let rq = ty(&r, "percpu:runqueues");
    assert_eq!((rq.objects, rq.bounced_objects, rq.bounce), (2, 1, true));
}

/// The example's records fed to the analyzer in the order they were written (a version 1
/// file's order; version 2 reads in time order), as a reader of a collector's rings sees them.
fn report_in_written_order(options: &Options) -> Report {
    let header = example::header();
    let symbols = crate::symbols::Kallsyms::parse(example::KALLSYMS.as_bytes());
    let mut analyzer = Analyzer::new(&header, &symbols, options);
    for (cpu, time_ns, record) in example::records().into_iter().flatten() {
        let kind = record.kind();
        let header = RecordHeader {
            kind: kind as u16,
            size: kind.record_size() as u16,
            cpu,
            time_ns,
        };
        analyzer.push(&header, &record);
    }
    analyzer.finish()
}

#[test]
fn written_order_replay_gets_the_reused_address_wrong() {
    // With no room to reorder, CPU 1's t=4500 sample is replayed after the free and
    // reallocation of SKB_B at t=5000/5100 and lands in the second lifetime: one bounce fewer.
    let options = Options {
        reorder_window_ns: 0,
        reorder_capacity: 1,
        two_threads: false,
    };
    let r = report_in_written_order(&options);
    let skb = ty(&r, "skbuff_head_cache");
    assert_eq!((skb.objects, skb.bounced_objects), (3, 1));
    assert!(r.ordering.late_records > 0);
    assert!(r.warnings.iter().any(|w| w.code == WarningCode::OutOfOrder));
    // The reorder buffer puts them right, and a version 2 file is read in time order.
    let reordered = report_in_written_order(&Options::default());
    assert_eq!(ty(&reordered, "skbuff_head_cache").bounced_objects, 2);
    let from_file = report_of(example::profile(), &options);
    assert_eq!(ty(&from_file, "skbuff_head_cache").bounced_objects, 2);
    assert_eq!(from_file.ordering.late_records, 0);
}

/// A version 2 file's records come merged in time order, so they skip the reorder buffer;
/// a record older than one before it (a CPU's ring out of time order) is still counted late.
#[test]
fn version_2_records_skip_the_reorder_buffer_and_late_ones_are_counted() {
    let mut chunks = example::records();
    // CPU 0's last record, older than every record before it.
    let free = Record::Free(Free {
        ptr: 0xffff_8880_0900_0000,
        call_site: 0xffff_ffff_8110_0000,
        cache: 0,
        flags: 0,
    });
    chunks[0].push((0, 1, free));
    let bytes = example::profile_with(&example::header(), example::KALLSYMS, &chunks);
    let r = report_of(bytes, &Options::default());
    assert_eq!(r.ordering.late_records, 1);
    assert_eq!(r.ordering.max_buffered, 0);
    assert!(r.warnings.iter().any(|w| w.code == WarningCode::OutOfOrder));
    assert_eq!(r.address_set.unknown_frees, 2);
}

/// A cache destroyed and another created at its address: each allocation counts for the cache
/// described before it, on one thread and on two, however close together they come.
#[test]
fn a_reused_cache_address_names_each_allocation_by_the_description_before_it() {
    const CACHE: u64 = 0xffff_8880_0a00_0000;
    let info = |name: &[u8]| {
        Record::CacheInfo(
            dprof_abi::CacheInfo {
                cache: CACHE,
                object_size: 64,
                size: 64,
                align: 8,
                slab_flags: 0,
                name_len: 0,
                origin: dprof_abi::CACHE_ORIGIN_SEEN,
                name: [0; dprof_abi::CACHE_NAME_BYTES],
            }
            .with_name(name),
        )
    };
    let alloc = |k: u64| {
        Record::Alloc(Alloc {
            ptr: 0xffff_8880_0b00_0000 + k * 64,
            call_site: 0xffff_ffff_8100_0010,
            cache: CACHE,
            bytes_req: 64,
            bytes_alloc: 64,
            ..Alloc::default()
        })
    };
    // Each object read once, so that its type is ranked.
    let read = |k: u64| {
        let regs = [
            (dprof_abi::reg::RSP, RSP),
            (dprof_abi::reg::RDI, 0xffff_8880_0b00_0000 + k * 64),
        ];
        Record::AccessSample(software_sample(
            0xffff_ffff_8110_0004,
            LOAD_RDI_8,
            &regs,
            gs_base(0),
        ))
    };
    let mut records = vec![(0, 10, info(b"eph_a"))];
    records.extend((0..3).flat_map(|k| [(0, 20 + 2 * k, alloc(k)), (0, 21 + 2 * k, read(k))]));
    records.push((0, 30, info(b"eph_b")));
    records.extend((3..8).flat_map(|k| [(0, 40 + 2 * k, alloc(k)), (0, 41 + 2 * k, read(k))]));
    let bytes = example::profile_with(&example::header(), example::KALLSYMS, &[records]);
    for two_threads in [false, true] {
        let options = Options {
            two_threads,
            ..Options::default()
        };
        let r = report_of(bytes.clone(), &options);
        assert_eq!(
            ty(&r, "eph_a").allocs,
            Some(3),
            "two threads: {two_threads}"
        );
        assert_eq!(
            ty(&r, "eph_b").allocs,
            Some(5),
            "two threads: {two_threads}"
        );
    }
}

#[test]
fn slab_types_have_live_counts_and_fields() {
    let r = example_report();
    let skb = ty(&r, "skbuff_head_cache");
    assert_eq!(skb.allocs, Some(3));
    assert_eq!(skb.frees, Some(1));
    assert_eq!(skb.peak_live_objects, Some(2));
    assert_eq!(skb.peak_live_bytes, Some(512));
    assert_eq!((skb.reads, skb.writes, skb.read_writes), (5, 1, 1));
    let offsets: Vec<(u64, u64)> = skb.fields.iter().map(|f| (f.offset, f.samples)).collect();
    assert_eq!(offsets, [(8, 3), (0x70, 3), (0x10, 1)]);
    assert_eq!(skb.fields[0].size, 8);
    assert_eq!(skb.fields[1].size, 4);
    let fns: Vec<(&str, u64)> = skb
        .functions
        .iter()
        .map(|f| (f.function.as_str(), f.samples))
        .collect();
    assert_eq!(fns, [("tcp_recvmsg", 4), ("tcp_sendmsg", 3)]);
    let cpus: Vec<(u32, u64)> = skb.cpus.iter().map(|c| (c.cpu, c.samples)).collect();
    assert_eq!(cpus, [(1, 4), (0, 3)]);
}

#[test]
fn types_only_allocated_are_counted_not_ranked() {
    let r = example_report();
    // filp is allocated once and never sampled: not ranked, counted, its object in the
    // address set.
    assert!(
        r.data_profile.types.iter().all(|t| t.name != "filp"),
        "{:?}",
        names(&r)
    );
    assert!(r.data_profile.types.iter().all(|t| t.samples > 0));
    assert_eq!(r.data_profile.unsampled_types, 1);
    assert_eq!(r.address_set.allocs, 8);
    // The working set still has its live object.
    let ws = views_of(example::profile())
        .working_set
        .expect("working set");
    assert!(ws.types.iter().any(|t| t.name == "filp"));
}

#[test]
fn generic_kmalloc_is_split_by_site() {
    let r = example_report();
    let skb = ty(&r, "kmalloc-1k@__alloc_skb");
    assert_eq!(skb.cache.as_deref(), Some("kmalloc-1k"));
    assert_eq!(skb.site.as_deref(), Some("__alloc_skb"));
    let pipe = ty(&r, "kmalloc-1k@alloc_pipe_info");
    assert_eq!((pipe.samples, pipe.writes, pipe.frees), (1, 1, Some(1)));
    let large = ty(&r, "kmalloc-large@do_sys_poll");
    assert_eq!(large.cache, None);
    assert_eq!(large.fields[0].offset, 0x2008);
    assert_eq!(large.peak_live_bytes, Some(16_384));
}

#[test]
fn globals_percpu_and_stack_resolve() {
    let r = example_report();
    let jiffies = ty(&r, "global:jiffies");
    assert_eq!((jiffies.kind, jiffies.samples), (TypeKind::Global, 1));
    assert_eq!(jiffies.fields[0].offset, 0);
    assert_eq!(jiffies.functions[0].function, "do_sys_poll");
    let rq = ty(&r, "percpu:runqueues");
    let offsets: Vec<(u64, u64)> = rq.fields.iter().map(|f| (f.offset, f.samples)).collect();
    assert_eq!(offsets, [(0, 2), (8, 1)]);
    let stack = ty(&r, "stack");
    assert_eq!((stack.kind, stack.samples), (TypeKind::Stack, 1));
    assert_eq!(stack.fields[0].offset, (RSP + 0x10) & (16 * 1024 - 1));
}

#[test]
fn address_set_counts_odd_frees() {
    let r = example_report();
    let a = r.address_set;
    assert_eq!(a.allocs, 8);
    assert_eq!(a.frees, 2);
    assert_eq!(a.unknown_frees, 1);
    assert_eq!(a.null_frees, 1);
    assert_eq!(a.missed_frees, 0);
    assert_eq!(a.live_at_end, 6);
    assert_eq!(a.peak_live_objects, 7);
    let unknown: Vec<&str> = r
        .unknown_functions
        .iter()
        .map(|f| f.function.as_str())
        .collect();
    assert_eq!(unknown, ["alloc_pipe_info", "do_sys_poll"]);
}

#[test]
fn the_example_needs_no_warning() {
    let r = example_report();
    assert_eq!(r.warnings, []);
    assert_eq!(r.ordering.late_records, 0);
    assert_eq!(r.ordering.forced_records, 0);
}

#[test]
fn no_samples_and_no_kallsyms_are_warned() {
    let records = vec![(
        0,
        10,
        Record::Alloc(Alloc {
            ptr: 0xffff_8880_0000_1000,
            call_site: 0xffff_ffff_8100_0010,
            cache: 0,
            bytes_req: 8192,
            bytes_alloc: 8192,
            flags: ALLOC_KMALLOC,
            ..Alloc::default()
        }),
    )];
    let r = views_of(example::profile_with(&example::header(), "", &[records]));
    let codes: Vec<WarningCode> = r.warnings.iter().map(|w| w.code).collect();
    assert_eq!(codes, [WarningCode::NoSamples, WarningCode::NoKallsyms]);
    assert!(r.warnings[0].message.contains("--events samples"));
    // Without symbols the site is an address; no sample: not ranked, in the working set.
    assert!(names(&r).is_empty());
    assert_eq!(r.data_profile.unsampled_types, 1);
    let ws = r.working_set.expect("working set");
    let ws_names: Vec<&str> = ws.types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(ws_names, ["kmalloc-large@0xffffffff81000010"]);
    assert_eq!(r.coverage.total_samples, 0);
    assert!(r.coverage.summary.starts_with("0 samples"));
}

#[test]
fn lost_records_and_slab_merging_are_warned() {
    let mut header = example::header();
    header.slab_merging = true;
    let mut chunks = example::records();
    chunks[1].push((3, 6_000, Record::Lost(Lost { count: 5 })));
    let r = report_of(
        example::profile_with(&header, example::KALLSYMS, &chunks),
        &Options::default(),
    );
    let codes: Vec<WarningCode> = r.warnings.iter().map(|w| w.code).collect();
    assert_eq!(codes, [WarningCode::SlabMerging, WarningCode::RecordsLost]);
    assert_eq!(r.profile.lost_records, 5);
}

/// A merged pool is split by allocation site, the report lists it, and the warning names it
/// instead of the generic one.
#[test]
fn merged_pools_are_split_by_site_and_named() {
    use dprof_fixtures::merged;
    let r = report_of(merged::profile(), &Options::default());
    let brief: Vec<(&str, Option<&str>, Option<&str>, u64)> = r
        .data_profile
        .types
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.cache.as_deref(),
                t.site.as_deref(),
                t.samples,
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            (
                "rtable@ip_route_output_key_hash",
                Some("rtable"),
                Some("ip_route_output_key_hash"),
                3
            ),
            (
                "rtable@locks_alloc_lock",
                Some("rtable"),
                Some("locks_alloc_lock"),
                2
            ),
            ("dentry", Some("dentry"), None, 1),
        ]
    );
    // Only the pools of the report's caches, once each.
    assert_eq!(
        r.profile.merged_caches,
        [dprof_model::MergedCache {
            cache: "rtable".to_owned(),
            pool: ":0000192".to_owned(),
            aliases: vec!["file_lock_cache".to_owned(), "rtable".to_owned()],
        }]
    );
    let merging: Vec<&Warning> = r
        .warnings
        .iter()
        .filter(|w| w.code == WarningCode::SlabMerging)
        .collect();
    assert_eq!(merging.len(), 1);
    assert!(
        merging[0]
            .message
            .contains("1 of the report's caches (rtable)"),
        "{}",
        merging[0].message
    );

    // The same records on a kernel whose header does not list pools: one type per cache and
    // the old warning.
    let mut header = merged::header();
    header.merged_caches.clear();
    let r = report_of(
        example::profile_with(&header, merged::KALLSYMS, &[merged::records()]),
        &Options::default(),
    );
    assert_eq!(names(&r), ["rtable", "dentry"]);
    assert!(r.profile.merged_caches.is_empty());
    let merging = r
        .warnings
        .iter()
        .find(|w| w.code == WarningCode::SlabMerging);
    assert!(merging.is_some_and(|w| w.message.contains("some types are merged")));

    // Pools listed, none among the report's caches: the types are exact, nothing to warn.
    let mut header = merged::header();
    header.merged_caches.retain(|p| p.pool != ":0000192");
    let r = report_of(
        example::profile_with(&header, merged::KALLSYMS, &[merged::records()]),
        &Options::default(),
    );
    assert_eq!(names(&r), ["rtable", "dentry"]);
    assert!(r
        .warnings
        .iter()
        .all(|w| w.code != WarningCode::SlabMerging));
}

#[test]
fn many_unknown_addresses_are_warned() {
    let samples = (0..10u64)
        .map(|i| {
            (
                0,
                100 + i,
                Record::AccessSample(software_sample(
                    0xffff_ffff_8110_0010,
                    LOAD_RDI_8,
                    &[(dprof_abi::reg::RDI, 0xffff_8880_1234_0000 + i * 64)],
                    gs_base(0),
                )),
            )
        })
        .collect();
    let r = report_of(
        example::profile_with(&example::header(), example::KALLSYMS, &[samples]),
        &Options::default(),
    );
    assert_eq!(r.coverage.count(Bucket::UnknownAddress), 10);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.code == WarningCode::ManyUnknown));
    assert_eq!(r.unknown_functions[0].function, "tcp_sendmsg");
}

#[test]
fn an_allocation_over_a_live_object_counts_a_missed_free() {
    let a = |t, ptr, size| {
        (
            0,
            t,
            Record::Alloc(Alloc {
                ptr,
                call_site: 0xffff_ffff_8120_0042,
                cache: example::SKB_CACHE,
                bytes_req: size,
                bytes_alloc: size,
                ..Alloc::default()
            }),
        )
    };
    let info = example::records()[0][0];
    let records = vec![
        info,
        a(10, 0x1_0000, 256),
        a(20, 0x1_0080, 256),
        (
            0,
            30,
            Record::Free(Free {
                ptr: 0x1_0000,
                ..Free::default()
            }),
        ),
    ];
    let r = views_of(example::profile_with(
        &example::header(),
        example::KALLSYMS,
        &[records],
    ));
    assert_eq!(r.address_set.missed_frees, 1);
    assert_eq!(r.address_set.unknown_frees, 1, "0x10000 was replaced");
    assert_eq!(r.address_set.live_at_end, 1);
    let ws = r.working_set.expect("working set");
    let skb = ws
        .types
        .iter()
        .find(|t| t.name == "skbuff_head_cache")
        .expect("in the working set");
    assert_eq!(skb.peak_objects, 1);
}

/// A small xorshift generator: deterministic "random" records.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn arbitrary_records_do_not_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let header = example::header();
    let symbols = crate::symbols::Kallsyms::parse(example::KALLSYMS.as_bytes());
    for round in 0..20 {
        let mut analyzer = Analyzer::new(
            &header,
            &symbols,
            &Options {
                reorder_window_ns: rng.next() % 10_000,
                reorder_capacity: (rng.next() % 64) as usize,
                two_threads: rng.next().is_multiple_of(2),
            },
        );
        for _ in 0..2_000 {
            let pick = |r: &mut Rng| match r.next() % 4 {
                0 => r.next(),
                1 => 0xffff_8880_0000_0000 + r.next() % 0x10_0000,
                2 => r.next() % 64,
                _ => u64::MAX - r.next() % 64,
            };
            let record = match rng.next() % 4 {
                0 => Record::Alloc(Alloc {
                    ptr: pick(&mut rng),
                    call_site: pick(&mut rng),
                    cache: [0, example::SKB_CACHE, example::KMALLOC_1K, pick(&mut rng)]
                        [(rng.next() % 4) as usize],
                    bytes_req: rng.next() as u32,
                    bytes_alloc: [rng.next() as u32, 64, 4096, u32::MAX][(rng.next() % 4) as usize],
                    flags: rng.next() as u32 & 1,
                    ..Alloc::default()
                }),
                1 => Record::Free(Free {
                    ptr: pick(&mut rng),
                    ..Free::default()
                }),
                2 => example::records()[0][(rng.next() % 4) as usize].2,
                _ => {
                    let mut insn = [0u8; 16];
                    for b in &mut insn {
                        *b = rng.next() as u8;
                    }
                    let len = (rng.next() % 17) as usize;
                    let mut s = software_sample(
                        pick(&mut rng),
                        &insn[..len],
                        &[
                            (rng.next() as usize % 16, pick(&mut rng)),
                            (rng.next() as usize % 16, pick(&mut rng)),
                        ],
                        pick(&mut rng),
                    );
                    s.flags = (rng.next() % 2) as u8;
                    Record::AccessSample(s)
                }
            };
            let header = RecordHeader {
                kind: record.kind() as u16,
                size: record.kind().record_size() as u16,
                cpu: (rng.next() % 8) as u32,
                time_ns: if round % 2 == 0 {
                    rng.next()
                } else {
                    rng.next() % 100_000
                },
            };
            analyzer.push(&header, &record);
        }
        let report = analyzer.finish();
        let c = &report.coverage;
        assert_eq!(
            c.buckets.iter().map(|b| b.samples).sum::<u64>(),
            c.total_samples
        );
        let typed: u64 = report.data_profile.types.iter().map(|t| t.samples).sum();
        assert!(
            (c.resolved_samples..=c.resolved_samples + c.two_location_samples).contains(&typed),
            "{typed} typed, {c:?}"
        );
    }
}

mod reordering {
    use super::super::reorder::ReorderBuffer;

    /// Pushes (cpu, time) items, returns the emitted times.
    fn run(buf: &mut ReorderBuffer<u64>, items: &[(u32, u64)]) -> Vec<u64> {
        let mut out = Vec::new();
        for &(cpu, t) in items {
            buf.push(cpu, t, t, |time, &item| {
                assert_eq!(time, item);
                out.push(time);
            });
        }
        buf.finish(|time, _| out.push(time));
        out
    }

    #[test]
    fn drains_interleaved_per_cpu_runs_into_time_order() {
        // Two CPUs drained in turn, each run time-ordered, runs overlapping in time.
        let mut items = Vec::new();
        for round in 0..100u64 {
            for cpu in 0..2u32 {
                for k in 0..10u64 {
                    items.push((cpu, round * 100 + k * 10 + u64::from(cpu)));
                }
            }
        }
        let mut buf = ReorderBuffer::new(2, 1_000_000, 1 << 20);
        let out = run(&mut buf, &items);
        assert_eq!(out.len(), items.len());
        assert!(out.windows(2).all(|w| w[0] <= w[1]));
        let c = buf.counts();
        assert_eq!((c.late, c.forced), (0, 0));
        // The per-CPU watermark keeps about one drain round buffered, not the whole input.
        assert!(c.max_buffered < 600, "{c:?}");
    }

    #[test]
    fn an_idle_cpu_holds_records_back_one_window_at_most() {
        // CPU 1 appears once, then is quiet; CPU 0 goes on for a long time.
        let mut items = vec![(1, 0)];
        items.extend((1..10_000u64).map(|t| (0, t * 1_000)));
        let mut buf = ReorderBuffer::new(2, 50_000, 1 << 20);
        let out = run(&mut buf, &items);
        assert!(out.windows(2).all(|w| w[0] <= w[1]));
        // 50 us of records at one per us: about 50 wait.
        assert!(buf.counts().max_buffered <= 60, "{:?}", buf.counts());
    }

    #[test]
    fn late_and_forced_records_are_counted() {
        let mut buf = ReorderBuffer::new(1, 100, 1 << 20);
        let out = run(&mut buf, &[(0, 1_000), (0, 2_000), (0, 10)]);
        assert_eq!(out, [1_000, 10, 2_000]);
        assert_eq!(buf.counts().late, 1);

        let mut buf = ReorderBuffer::new(4, u64::MAX, 3);
        let out = run(&mut buf, &[(0, 5), (1, 4), (2, 3), (3, 2), (0, 1)]);
        assert_eq!(out.len(), 5);
        assert!(buf.counts().forced > 0);
        assert!(buf.counts().max_buffered <= 4);
    }

    #[test]
    fn out_of_order_within_one_cpu_is_sorted() {
        let mut buf = ReorderBuffer::new(1, 1_000, 1 << 20);
        let out = run(&mut buf, &[(0, 10), (0, 30), (0, 20), (0, 5), (0, 40)]);
        assert_eq!(out, [5, 10, 20, 30, 40]);
        assert_eq!(buf.counts().late, 0);
        assert!(buf.is_empty());
    }
}

/// The reorder buffer against a plain model of its contract: items leave as the oldest
/// (time, queue) head while it is due or the buffer is over capacity.
mod reordering_model {
    use super::super::reorder::{ReorderBuffer, ReorderCounts, RECOMPUTE_EVERY};
    use super::Rng;

    /// The contract, written for clarity, not speed.
    struct Model {
        queues: Vec<Vec<(u64, u64)>>,
        latest: Vec<Option<u64>>,
        expected_cpus: usize,
        window: u64,
        capacity: usize,
        first: Option<u64>,
        newest: u64,
        watermark: u64,
        pushed: u64,
        last: Option<u64>,
        counts: ReorderCounts,
    }

    impl Model {
        fn len(&self) -> usize {
            self.queues.iter().map(Vec::len).sum()
        }

        fn push(&mut self, cpu: u32, time: u64, item: u64, out: &mut Vec<(u64, u64)>) {
            if self.last.is_some_and(|l| time < l) {
                self.counts.late += 1;
            }
            self.newest = self.newest.max(time);
            self.first.get_or_insert(time);
            let q = cpu as usize;
            if q >= self.queues.len() {
                self.queues.resize(q + 1, Vec::new());
                self.latest.resize(q + 1, None);
            }
            self.latest[q] = Some(self.latest[q].map_or(time, |l| l.max(time)));
            let at = self.queues[q].partition_point(|&(t, _)| t <= time);
            self.queues[q].insert(at, (time, item));
            self.counts.max_buffered = self.counts.max_buffered.max(self.len() as u64);
            self.pushed += 1;
            if self.pushed.is_multiple_of(RECOMPUTE_EVERY) {
                let seen = self.latest.iter().flatten().count();
                let warm = seen >= self.expected_cpus
                    || self
                        .first
                        .is_some_and(|f| self.newest.saturating_sub(f) >= self.window);
                if warm {
                    if let Some(min) = self.latest.iter().flatten().min() {
                        self.watermark = self.watermark.max(*min);
                    }
                }
            }
            let floor = self.newest.saturating_sub(self.window).max(self.watermark);
            self.drain(Some(floor), out);
        }

        fn drain(&mut self, floor: Option<u64>, out: &mut Vec<(u64, u64)>) {
            loop {
                let head = (0..self.queues.len())
                    .filter_map(|q| self.queues[q].first().map(|&(t, _)| (t, q)))
                    .min();
                let Some((time, q)) = head else { return };
                let due = floor.is_none_or(|f| time <= f);
                if !due && self.len() <= self.capacity {
                    return;
                }
                if !due {
                    self.counts.forced += 1;
                }
                let (time, item) = self.queues[q].remove(0);
                self.last = Some(self.last.map_or(time, |l| l.max(time)));
                out.push((time, item));
            }
        }
    }

    #[test]
    fn the_buffer_does_what_the_model_does() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for round in 0..200u64 {
            let cpus = 1 + rng.next() % 40;
            let expected = 1 + (rng.next() % 40) as usize;
            let window = [0, 10, 1_000, 100_000, u64::MAX][(rng.next() % 5) as usize];
            let capacity = [1, 3, 50, 1 << 20][(rng.next() % 4) as usize];
            let mut buf = ReorderBuffer::new(expected, window, capacity);
            let mut model = Model {
                queues: Vec::new(),
                latest: Vec::new(),
                expected_cpus: expected,
                window,
                capacity,
                first: None,
                newest: 0,
                watermark: 0,
                pushed: 0,
                last: None,
                counts: ReorderCounts::default(),
            };
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let mut clock = vec![0u64; cpus as usize];
            for i in 0..3_000u64 {
                let cpu = (rng.next() % cpus) as u32;
                // Mostly per-CPU time order, sometimes a step back, sometimes equal times.
                let c = &mut clock[cpu as usize];
                match rng.next() % 10 {
                    0 => *c = c.saturating_sub(rng.next() % 500),
                    1 => {}
                    _ => *c += rng.next() % (100 + round * 10),
                }
                buf.push(cpu, *c, i, |t, &item| got.push((t, item)));
                model.push(cpu, *c, i, &mut want);
                assert_eq!(buf.len(), model.len(), "round {round}, item {i}");
            }
            buf.finish(|t, &item| got.push((t, item)));
            model.drain(None, &mut want);
            assert_eq!(got, want, "round {round}");
            assert_eq!(buf.counts(), model.counts, "round {round}");
            assert!(buf.is_empty());
        }
    }
}

/// Two threads (one reading and decoding, one replaying) give the very report one thread
/// gives, on profiles with every kind of record.
#[test]
fn two_threads_give_the_report_one_thread_gives() {
    let profiles = [
        ("example", example::profile()),
        ("views", dprof_fixtures::views::profile()),
        ("histories", dprof_fixtures::histories::profile()),
        (
            "ibs",
            dprof_fixtures::hardware::profile(dprof_fixtures::hardware::Sampler::Ibs),
        ),
        ("causal", dprof_fixtures::causal::profile_with_samples()),
    ];
    for (name, bytes) in profiles {
        let profile = Profile::from_vec(bytes).expect("valid profile");
        let symbols = crate::symbols::Kallsyms::parse(profile.kallsyms());
        let views = crate::views::ViewOptions::default();
        let report = |two_threads| {
            let options = Options {
                two_threads,
                ..Options::default()
            };
            analyze_views(&profile, &symbols, &options, &views, &mut |_| {}).expect("valid")
        };
        // The cache simulation's own timing is the one thing that differs run to run.
        let timeless = |mut r: Report| {
            if let Some(ws) = r.working_set.as_mut() {
                ws.simulation.seconds = 0.0;
                ws.simulation.accesses_per_second = 0.0;
            }
            r
        };
        let (one, two) = (timeless(report(false)), timeless(report(true)));
        assert!(one == two, "{name}: the reports differ");
        assert!(
            one.coverage.total_samples > 0 || name == "histories",
            "{name}"
        );
    }
}

/// A sample of an instruction that touches two locations counts once in the coverage, by
/// the first location that resolves, and for each location's type.
#[test]
fn two_location_samples_count_for_each_type_and_once_in_coverage() {
    use dprof_abi::reg;
    use dprof_fixtures::data_profile::SKB_A;
    const UNMAPPED: u64 = 0xffff_8880_dead_0000;
    const IP: u64 = 0xffff_ffff_8110_0000;
    let sample = |insn: &[u8], regs: &[(usize, u64)]| {
        let mut all = vec![(reg::RSP, RSP)];
        all.extend_from_slice(regs);
        Record::AccessSample(software_sample(IP, insn, &all, gs_base(0)))
    };
    let mut chunks = example::records();
    chunks[1].extend([
        // push 0x8(%rdi): reads the skb, writes the stack; counts as slab.
        (0, 9_000, sample(&[0xff, 0x77, 0x08], &[(reg::RDI, SKB_A)])),
        // call *(%rdi) through nothing known: the stack write resolves; counts as stack.
        (0, 9_100, sample(&[0xff, 0x17], &[(reg::RDI, UNMAPPED)])),
        // movsq to nothing known from the skb: counts as slab.
        (
            0,
            9_200,
            sample(
                &[0x48, 0xa5],
                &[(reg::RDI, UNMAPPED), (reg::RSI, SKB_A + 0x10)],
            ),
        ),
    ]);
    let bytes = example::profile_with(&example::header(), example::KALLSYMS, &chunks);
    let before = example_report();
    for options in [
        Options::default(),
        Options {
            two_threads: false,
            ..Options::default()
        },
    ] {
        let after = report_of(bytes.clone(), &options);
        let (b, a) = (&before.coverage, &after.coverage);
        assert_eq!(a.total_samples, b.total_samples + 3);
        assert_eq!(a.count(Bucket::Slab), b.count(Bucket::Slab) + 2);
        assert_eq!(a.count(Bucket::Stack), b.count(Bucket::Stack) + 1);
        assert_eq!(
            a.count(Bucket::UnknownAddress),
            b.count(Bucket::UnknownAddress)
        );
        assert_eq!(a.two_location_samples, 3);
        assert!(a
            .summary
            .ends_with("; 3 samples touched two locations, each counted for its type"));
        let samples = |r: &Report, name: &str| ty(r, name).samples;
        assert_eq!(
            samples(&after, "skbuff_head_cache"),
            samples(&before, "skbuff_head_cache") + 2
        );
        assert_eq!(samples(&after, "stack"), samples(&before, "stack") + 2);
        // The skb's fields: 0x8 read by the push, 0x10 by the movs.
        let skb = ty(&after, "skbuff_head_cache");
        let field = |offset: u64| {
            skb.fields
                .iter()
                .find(|f| f.offset == offset)
                .map_or(0, |f| f.samples)
        };
        let old = ty(&before, "skbuff_head_cache");
        let old_field = |offset: u64| {
            old.fields
                .iter()
                .find(|f| f.offset == offset)
                .map_or(0, |f| f.samples)
        };
        assert_eq!(field(8), old_field(8) + 1);
        assert_eq!(field(0x10), old_field(0x10) + 1);
    }
}

/// A kernel instruction that reads user memory (`copy_from_user`) resolves to the `user
/// memory` region, a resolved bucket of its own.
#[test]
fn kernel_accesses_to_user_memory_are_a_region() {
    use dprof_abi::reg;
    let mut chunks = example::records();
    let read = software_sample(
        0xffff_ffff_8110_0000,
        LOAD_RDI_8,
        &[(reg::RSP, RSP), (reg::RDI, 0x7ffd_2500_1000)],
        gs_base(0),
    );
    chunks[1].push((0, 9_000, Record::AccessSample(read)));
    let bytes = example::profile_with(&example::header(), example::KALLSYMS, &chunks);
    let (before, after) = (example_report(), report_of(bytes, &Options::default()));
    assert_eq!(after.coverage.count(Bucket::Region), 1);
    assert_eq!(
        after.coverage.resolved_samples,
        before.coverage.resolved_samples + 1
    );
    let user = ty(&after, crate::resolve::USER_MEMORY_TYPE);
    assert_eq!(
        (user.kind, user.samples, user.objects),
        (TypeKind::Region, 1, 1)
    );
    assert_eq!(user.fields[0].offset, 8);
}

/// With the kernel's memory layout in the header, a sample in the `struct page` array is the
/// `struct page` region at its offset in the C struct, and the field names come from `page`.
#[test]
fn struct_page_accesses_resolve_with_the_memory_layout() {
    use dprof_abi::reg;
    let mut header = example::header();
    header.memory_layout = Some(dprof_format::MemoryLayout {
        page_offset_base: 0xffff_8880_0000_0000,
        vmalloc_base: 0xffff_c900_0000_0000,
        vmemmap_base: 0xffff_ea00_0000_0000,
        struct_page_size: 64,
    });
    let mut chunks = example::records();
    // mov 0x8(%rdi),%rax with %rdi at the 5th struct page: its +8.
    let read = software_sample(
        0xffff_ffff_8110_0000,
        LOAD_RDI_8,
        &[(reg::RSP, RSP), (reg::RDI, 0xffff_ea00_0000_0100)],
        gs_base(0),
    );
    chunks[1].push((0, 9_000, Record::AccessSample(read)));
    let without = report_of(
        example::profile_with(&example::header(), example::KALLSYMS, &chunks),
        &Options::default(),
    );
    let mut with = report_of(
        example::profile_with(&header, example::KALLSYMS, &chunks),
        &Options::default(),
    );
    assert_eq!(
        with.coverage.count(Bucket::UnknownAddress) + 1,
        without.coverage.count(Bucket::UnknownAddress)
    );
    let page = ty(&with, crate::resolve::STRUCT_PAGE_TYPE);
    assert_eq!((page.kind, page.samples), (TypeKind::Region, 1));
    assert_eq!(page.fields[0].offset, 8);
    crate::report::annotate_fields(&mut with, &crate::report::StructNames::default(), None);
    let page = ty(&with, crate::resolve::STRUCT_PAGE_TYPE);
    assert_eq!(page.struct_name.as_deref(), Some("page"));
}

/// With the owners of the pages samples touched, an object allocated before collection is
/// its cache's object, counted in its own bucket, and page memory is a region by its use.
#[test]
fn objects_from_before_collection_and_page_memory_resolve_through_page_owners() {
    use dprof_abi::reg;
    use dprof_format::{OwnedPage, PageOwners, PageUsage, SlabPages};
    // Away from the example's own unknown address.
    const SLAB: u64 = 0xffff_8880_0b00_0000;
    const PAGE: u64 = 0xffff_8880_0a00_0000;
    let mut chunks = example::records();
    let load = |t: u64, addr: u64| {
        (
            0,
            t,
            Record::AccessSample(software_sample(
                0xffff_ffff_8110_0000,
                LOAD_RDI_8,
                &[(reg::RSP, RSP), (reg::RDI, addr - 8)],
                gs_base(0),
            )),
        )
    };
    // The second and fourth 256-byte objects of a skbuff_head_cache slab, and a page of the
    // page cache twice.
    chunks[1].extend([
        load(9_000, SLAB + 256 + 0x10),
        load(9_100, SLAB + 3 * 256 + 0x10),
        load(9_200, PAGE + 0x40),
        load(9_300, PAGE + 0x80),
    ]);
    let owners = PageOwners {
        slabs: vec![SlabPages {
            first_object: SLAB,
            stride: 256,
            objects: 16,
            cache: "skbuff_head_cache".to_owned(),
        }],
        pages: vec![OwnedPage {
            page: PAGE,
            usage: PageUsage::PageCache,
        }],
    };
    let header = example::header();
    let without = report_of(
        example::profile_with(&header, example::KALLSYMS, &chunks),
        &Options::default(),
    );
    let with = report_of(
        example::profile_with_page_owners(&header, &chunks, owners),
        &Options::default(),
    );
    assert_eq!(
        with.coverage.count(Bucket::UnknownAddress) + 4,
        without.coverage.count(Bucket::UnknownAddress)
    );
    assert_eq!(with.coverage.count(Bucket::UntracedSlab), 2);
    assert_eq!(
        with.coverage.count(Bucket::Region),
        without.coverage.count(Bucket::Region) + 2
    );
    // The cache's type, which its traced objects have too: two more objects, two more samples.
    let skb = ty(&with, "skbuff_head_cache");
    let skb_before = ty(&without, "skbuff_head_cache");
    assert_eq!(skb.samples, skb_before.samples + 2);
    assert_eq!(skb.objects, skb_before.objects + 2);
    assert!(skb.fields.iter().any(|f| f.offset == 0x10));
    let page = ty(&with, "page cache page");
    assert_eq!(
        (page.kind, page.samples, page.objects),
        (TypeKind::Region, 2, 1)
    );
}

#[test]
fn kernel_samples_of_the_collector_s_process_are_the_profilers_own() {
    let plain = example_report();
    let r = report_of(
        example::profile_of_the_collector_s_own_work(),
        &Options::default(),
    );
    let c = &r.coverage;
    assert_eq!(c.total_samples, plain.coverage.total_samples + 2);
    assert_eq!(c.count(Bucket::Profiler), 1);
    // The other process's sample is the workload's: one more on the sk_buff, and no more.
    assert_eq!(c.resolved_samples, plain.coverage.resolved_samples + 1);
    assert_eq!(
        ty(&r, "skbuff_head_cache").samples,
        ty(&plain, "skbuff_head_cache").samples + 1
    );
    // One thread counts as two do.
    let one = report_of(
        example::profile_of_the_collector_s_own_work(),
        &Options {
            two_threads: false,
            ..Options::default()
        },
    );
    assert_eq!(one.coverage.count(Bucket::Profiler), 1);
    assert_eq!(one.coverage.resolved_samples, c.resolved_samples);
}

#[test]
fn samples_in_dprof_ko_are_the_profilers_own() {
    let plain = example_report();
    let r = report_of(
        example::profile_with_profiler_samples(),
        &Options::default(),
    );
    let c = &r.coverage;
    assert_eq!(c.total_samples, plain.coverage.total_samples + 3);
    assert_eq!(c.count(Bucket::Profiler), 2);
    // Nothing of dprof.ko is resolved nor unknown: the workload's figures are unchanged.
    assert_eq!(c.resolved_samples, plain.coverage.resolved_samples);
    assert_eq!(
        ty(&r, "skbuff_head_cache").samples,
        ty(&plain, "skbuff_head_cache").samples
    );
    assert_eq!(
        c.count(Bucket::UnknownAddress),
        plain.coverage.count(Bucket::UnknownAddress) + 1,
        "another module's sample is the workload's"
    );
    let unknown: Vec<&str> = r
        .unknown_functions
        .iter()
        .map(|f| f.function.as_str())
        .collect();
    assert!(unknown.contains(&"dprof_selftest_produce"), "{unknown:?}");
    assert!(
        !unknown.iter().any(|f| f.contains("Session")),
        "{unknown:?}"
    );
    assert!(c.summary.contains("profiler (dprof) 6.9%"), "{}", c.summary);
    // Without dprof.ko (the perf backend) there is no such bucket's samples.
    assert_eq!(plain.coverage.count(Bucket::Profiler), 0);
    // One thread counts as two do.
    let one = report_of(
        example::profile_with_profiler_samples(),
        &Options {
            two_threads: false,
            ..Options::default()
        },
    );
    assert_eq!(one.coverage, r.coverage);
}

#[test]
fn samples_in_the_kernel_s_debugging_code_are_left_out_and_kasan_shadow_is_a_region() {
    let plain = example_report();
    let r = report_of(example::profile_on_a_debug_kernel(), &Options::default());
    let c = &r.coverage;
    assert_eq!(c.total_samples, plain.coverage.total_samples + 4);
    // Lockdep's two samples and the unwinder's (lockdep and KASAN walk stacks).
    assert_eq!(c.count(Bucket::KernelDebugging), 3);
    assert_eq!(plain.coverage.count(Bucket::KernelDebugging), 0);
    // Lockdep reading an sk_buff does not count for it: the types are the workload's.
    assert_eq!(
        ty(&r, "skbuff_head_cache").samples,
        ty(&plain, "skbuff_head_cache").samples
    );
    assert_eq!(
        c.count(Bucket::UnknownAddress),
        plain.coverage.count(Bucket::UnknownAddress),
        "nothing in the debugging code is unknown"
    );
    // Instrumented code reading KASAN's shadow: a named region, not an unknown address.
    let shadow = ty(&r, crate::resolve::KASAN_SHADOW_TYPE);
    assert_eq!((shadow.kind, shadow.samples), (TypeKind::Region, 1));
    assert_eq!(
        c.count(Bucket::Region),
        plain.coverage.count(Bucket::Region) + 1
    );
    assert!(
        c.summary
            .contains("kernel debugging (sanitizers, lockdep) 10.0%"),
        "{}",
        c.summary
    );
    let one = report_of(
        example::profile_on_a_debug_kernel(),
        &Options {
            two_threads: false,
            ..Options::default()
        },
    );
    assert_eq!(one.coverage, r.coverage);
}
