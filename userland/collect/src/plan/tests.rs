//! The planner: watch spans, and plans for hand-built data profiles.

use dprof_model::histories::Span;
use dprof_model::{
    AddressSetStats, Bucket, Coverage, DataProfile, FieldCount, Metric, OrderingStats, ProfileInfo,
    TypeProfile,
};

use super::*;

fn field(offset: u64, size: u32, samples: u64) -> FieldCount {
    FieldCount {
        offset,
        size,
        field: None,
        samples,
        reads: samples,
        writes: 0,
        read_writes: 0,
        misses: None,
    }
}

fn slab(
    name: &str,
    cache: &str,
    site: Option<&str>,
    share: f64,
    fields: Vec<FieldCount>,
) -> TypeProfile {
    TypeProfile {
        rank: 0,
        name: name.to_owned(),
        kind: dprof_model::TypeKind::Slab,
        cache: Some(cache.to_owned()),
        site: site.map(str::to_owned),
        struct_name: None,
        object_size: Some(256),
        samples: 100,
        share,
        reads: 100,
        writes: 0,
        read_writes: 0,
        objects: 1,
        bounced_objects: 0,
        bounce: false,
        bounced_histories: None,
        allocs: Some(1),
        frees: Some(1),
        peak_live_objects: Some(1),
        peak_live_bytes: Some(256),
        hardware: None,
        functions: Vec::new(),
        fields,
        cpus: Vec::new(),
    }
}

fn data_report(mut types: Vec<TypeProfile>) -> dprof_model::Report {
    for (i, t) in types.iter_mut().enumerate() {
        t.rank = i + 1;
    }
    dprof_model::Report {
        profile: ProfileInfo {
            kernel_release: String::new(),
            cpu_model: String::new(),
            online_cpus: 2,
            slab_merging: false,
            merged_caches: Vec::new(),
            records: 0,
            first_time_ns: None,
            last_time_ns: None,
            lost_records: 0,
            kallsyms_functions: 0,
        },
        coverage: Coverage::from_counts(&[0; Bucket::ALL.len()]),
        data_profile: DataProfile {
            metric: Metric::Samples,
            resolved_samples: 0,
            hardware: None,
            types,
            unsampled_types: 0,
        },
        unknown_functions: Vec::new(),
        address_set: AddressSetStats::default(),
        ordering: OrderingStats::default(),
        warnings: Vec::new(),
        histories: None,
        misses: None,
        working_set: None,
        causal: None,
    }
}

const PLAN_KALLSYMS: &[u8] = b"\
ffffffff81200000 T __alloc_skb
ffffffff81200400 T kfree_skbmem
ffffffff81300000 t dup_name
ffffffff81300100 t dup_name
ffffffff81300200 T _etext
";

#[test]
fn the_planner_watches_top_offsets_singly_and_in_consecutive_pairs() {
    let report = data_report(vec![slab(
        "skbuff_head_cache",
        "skbuff_head_cache",
        None,
        0.9,
        vec![
            field(0x70, 4, 50),
            field(0x10, 8, 30),
            field(0x19, 2, 10),
            field(0x72, 2, 5),
        ],
    )]);
    let kallsyms = Kallsyms::parse(PLAN_KALLSYMS);
    let targets = plan(&report, &kallsyms, PlanBudget::default());
    let ranges: Vec<Vec<(u32, u32)>> = targets
        .iter()
        .map(|t| t.ranges.iter().map(|r| (r.offset, r.len)).collect())
        .collect();
    // +0x72 overlaps the range of +0x70 and is left out; +0x19/2 needs 4 aligned bytes.
    assert_eq!(
        ranges,
        vec![
            vec![(0x70, 4)],
            vec![(0x10, 8), (0x70, 4)],
            vec![(0x10, 8)],
            vec![(0x10, 8), (0x18, 4)],
            vec![(0x18, 4)],
        ]
    );
    for t in &targets {
        let abi = t.to_abi();
        assert_eq!(abi.name_bytes(), b"skbuff_head_cache");
        assert_eq!((abi.site_start, abi.site_end), (0, 0));
        assert!(abi.ranges.iter().all(|r| r.len == 0 || r.is_watchable()));
        assert!(abi.ranges[1].len == 0 || !abi.ranges[0].overlaps(abi.ranges[1]));
    }
    // The planned targets are ones the module accepts.
    for t in &targets {
        let mut buf = [0u8; dprof_abi::HistoryTarget::SIZE];
        t.to_abi().encode(&mut buf);
        assert_eq!(dprof_abi::HistoryTarget::decode(&buf), Ok(t.to_abi()));
    }
}

#[test]
fn the_planner_shares_eight_targets_by_share_and_resolves_kmalloc_sites() {
    let many = |n: u64| (0..n).map(|i| field(i * 8, 8, 100 - i)).collect::<Vec<_>>();
    let report = data_report(vec![
        slab(
            "kmalloc-1k@__alloc_skb",
            "kmalloc-1k",
            Some("__alloc_skb"),
            0.55,
            many(6),
        ),
        slab("task_struct", "task_struct", None, 0.3, many(6)),
        slab(
            "kmalloc-64@dup_name",
            "kmalloc-64",
            Some("dup_name"),
            0.1,
            many(2),
        ),
        slab("filp", "filp", None, 0.1, many(6)),
        slab("tiny", "tiny", None, 0.001, many(6)),
    ]);
    let kallsyms = Kallsyms::parse(PLAN_KALLSYMS);
    let detailed = plan_detailed(&report, &kallsyms, PlanBudget::default());
    let targets = &detailed.targets;
    assert_eq!(targets.len(), PLANNED_TARGETS);
    let count = |name: &str| targets.iter().filter(|t| t.type_name == name).count();
    // One each, then D'Hondt over 0.55, 0.3, 0.1: 0.275, 0.183, 0.15 (task_struct), 0.1375,
    // 0.11 (the ambiguous dup_name type is skipped, tiny is below the minimum share).
    assert_eq!(count("kmalloc-1k@__alloc_skb"), 5);
    assert_eq!(count("task_struct"), 2);
    assert_eq!(count("filp"), 1);
    assert_eq!(count("tiny"), 0);
    assert_eq!(detailed.skipped.len(), 1);
    assert!(
        detailed.skipped[0].reason.contains("ambiguous"),
        "{:?}",
        detailed.skipped
    );
    let skb = &targets[0];
    assert_eq!(skb.cache, "kmalloc-1k");
    let site = skb.site.clone().expect("site");
    assert_eq!(
        (site.start, site.end),
        (0xffff_ffff_8120_0000, 0xffff_ffff_8120_0400)
    );
    let abi = skb.to_abi();
    assert_eq!(abi.name_bytes(), b"kmalloc-1k");
    assert_eq!((abi.site_start, abi.site_end), (site.start, site.end));
    // Targets of a type: s1, p12, s2, p23.
    let first_four: Vec<Vec<u32>> = targets[..4]
        .iter()
        .map(|t| t.ranges.iter().map(|r| r.offset).collect())
        .collect();
    assert_eq!(first_four, vec![vec![0], vec![0, 8], vec![8], vec![8, 16]]);
    // A smaller budget is respected.
    let small = plan(
        &report,
        &kallsyms,
        PlanBudget {
            max_targets: 2,
            ..PlanBudget::default()
        },
    );
    assert_eq!(small.len(), 2);
    assert_ne!(small[0].type_name, small[1].type_name);
    // A budget above the ABI's cap is capped.
    let big = plan(
        &report,
        &kallsyms,
        PlanBudget {
            max_targets: 100,
            max_types: 100,
            ..PlanBudget::default()
        },
    );
    assert!(big.len() <= PLANNED_TARGETS);
}

/// A merged pool's per-site type watches only the objects its site allocates, as a generic
/// kmalloc cache's does: the pool holds other caches' objects too.
#[test]
fn a_merged_pools_type_is_planned_with_its_site() {
    let report = data_report(vec![slab(
        "skbuff_head_cache@__alloc_skb",
        "skbuff_head_cache",
        Some("__alloc_skb"),
        0.9,
        vec![field(0x70, 4, 50)],
    )]);
    let kallsyms = Kallsyms::parse(PLAN_KALLSYMS);
    let targets = plan(&report, &kallsyms, PlanBudget::default());
    assert!(!targets.is_empty());
    for t in &targets {
        let abi = t.to_abi();
        assert_eq!(abi.name_bytes(), b"skbuff_head_cache");
        assert_eq!(
            (abi.site_start, abi.site_end),
            (0xffff_ffff_8120_0000, 0xffff_ffff_8120_0400)
        );
    }
}

#[test]
fn watch_spans_are_aligned_and_cover_the_access() {
    let s = |offset, len| Some(Span { offset, len });
    assert_eq!(watch_span(0x10, 8), s(0x10, 8));
    assert_eq!(watch_span(0x18, 4), s(0x18, 4));
    assert_eq!(watch_span(0x1a, 2), s(0x1a, 2));
    assert_eq!(watch_span(0x1b, 1), s(0x1b, 1));
    // A 2-byte access at an odd offset needs 4 (or 8) aligned bytes.
    assert_eq!(watch_span(0x19, 2), s(0x18, 4));
    assert_eq!(watch_span(0x1b, 2), s(0x18, 8));
    // A misaligned 8-byte access: the aligned 8 bytes holding its start.
    assert_eq!(watch_span(0x14, 8), s(0x10, 8));
    // Larger than a register: its first 8 bytes.
    assert_eq!(watch_span(0x40, 64), s(0x40, 8));
    // Unknown size: 4 bytes.
    assert_eq!(watch_span(0x24, 0), s(0x24, 4));
    assert_eq!(watch_span(u64::from(u32::MAX) + 1, 4), None);
    for offset in 0..64 {
        for size in [0, 1, 2, 4, 8, 16] {
            let span = watch_span(offset, size).expect("span");
            assert!(
                span.offset.is_multiple_of(span.len),
                "{offset} {size} {span:?}"
            );
            assert!(matches!(span.len, 1 | 2 | 4 | 8));
            assert!(u64::from(span.offset) <= offset);
            assert!(u64::from(span.offset + span.len) > offset);
        }
    }
}
