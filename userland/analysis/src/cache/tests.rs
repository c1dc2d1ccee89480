//! Geometry from headers, `--cache` parsing and its errors, set indices, and the LRU
//! simulator on access sequences with known outcomes.

use super::sim::{Hierarchy, Outcome, SetCache};
use super::*;
use dprof_model::cache::{cpu_list, GeometrySource};

fn sysfs(
    level: u32,
    cache_type: &str,
    size: u64,
    ways: u32,
    sets: u32,
    cpus: &str,
) -> CacheGeometry {
    CacheGeometry {
        level,
        cache_type: cache_type.to_owned(),
        size_bytes: Some(size),
        ways: Some(ways),
        line_bytes: Some(64),
        sets: Some(sets),
        shared_cpu_list: cpus.to_owned(),
    }
}

/// The QEMU guest's caches as its sysfs lists them (two CPUs).
fn guest() -> Vec<CacheGeometry> {
    vec![
        sysfs(1, "Data", 64 << 10, 2, 512, "0"),
        sysfs(1, "Instruction", 64 << 10, 2, 512, "0"),
        sysfs(2, "Unified", 512 << 10, 16, 512, "0"),
        sysfs(3, "Unified", 16 << 20, 16, 16384, "0-1"),
        sysfs(1, "Data", 64 << 10, 2, 512, "1"),
        sysfs(1, "Instruction", 64 << 10, 2, 512, "1"),
        sysfs(2, "Unified", 512 << 10, 16, 512, "1"),
    ]
}

#[test]
fn the_guest_header_gives_three_data_levels_with_their_sharing() {
    let model = CacheModel::from_header(&guest());
    assert!(model.notes.is_empty(), "{:?}", model.notes);
    let names: Vec<&str> = model.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["L1d", "L2", "L3"]);
    let l1 = &model.levels[0];
    assert_eq!(
        (l1.size_bytes, l1.ways, l1.line_bytes, l1.sets),
        (64 << 10, 2, 64, 512)
    );
    assert_eq!(l1.instances, ["0", "1"]);
    assert_eq!(l1.shared_cpus, "0");
    assert!(l1.is_private());
    assert_eq!((l1.instance_of(0), l1.instance_of(1)), (0, 1));
    // A CPU sysfs did not list gets a private cache of its own.
    assert_eq!(l1.instance_of(5), 2 + 5);
    let l3 = &model.levels[2];
    assert_eq!(l3.sets, 16384);
    assert!(!l3.is_private());
    assert_eq!(
        (l3.instance_of(0), l3.instance_of(1), l3.instance_of(7)),
        (0, 0, 0)
    );
    assert_eq!(l3.source, GeometrySource::Profile);
}

#[test]
fn set_index_is_the_line_number_modulo_the_sets() {
    let model = CacheModel::from_header(&guest());
    let l1 = &model.levels[0];
    // 512 sets of 64-byte lines: the set repeats every 32 KiB.
    assert_eq!(l1.set_of(0xffff_8880_0000_0000), 0);
    assert_eq!(l1.set_of(0xffff_8880_0000_0040), 1);
    assert_eq!(l1.set_of(0xffff_8880_0000_8000), 0);
    assert_eq!(l1.set_of(0xffff_8880_0000_7fff), 511);
    assert_eq!(l1.line_of(0x1234_5678), 0x1234_5678 >> 6);
}

#[test]
fn incomplete_or_inconsistent_levels_are_left_out_with_a_note() {
    let mut caches = guest();
    // A sliced L3 with a set count that is not a power of two (30 MiB, 20-way).
    caches[3] = sysfs(3, "Unified", 30 << 20, 20, 24576, "0-1");
    // An L2 whose sysfs set count disagrees with size / (ways x line).
    caches[2].sets = Some(1024);
    caches[6].sets = Some(1024);
    let model = CacheModel::from_header(&caches);
    let names: Vec<&str> = model.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["L1d"]);
    assert_eq!(model.notes.len(), 2, "{:?}", model.notes);
    assert!(
        model.notes[0]
            .starts_with("L2 left out: sysfs says 1024 sets but size / (ways x line) gives 512"),
        "{:?}",
        model.notes
    );
    assert!(
        model.notes[1]
            .contains("L3 left out: size / (ways x line) = 24576 sets, not a power of two"),
        "{:?}",
        model.notes
    );
    assert!(model.notes[1].ends_with("--cache L3=SIZE/WAYS/LINE gives it"));
}

#[test]
fn a_missing_size_or_way_count_is_completed_from_the_others() {
    let mut no_size = sysfs(2, "Unified", 0, 16, 512, "0");
    no_size.size_bytes = None;
    let mut no_ways = sysfs(3, "Unified", 16 << 20, 0, 16384, "0");
    no_ways.ways = None;
    let mut no_line = sysfs(1, "Data", 32 << 10, 8, 64, "0");
    no_line.line_bytes = None;
    let model = CacheModel::from_header(&[no_line, no_size, no_ways]);
    assert_eq!(model.levels.len(), 2);
    assert_eq!(model.levels[0].size_bytes, 512 << 10);
    assert_eq!(model.levels[1].ways, 16);
    assert_eq!(
        model.notes,
        ["L1d left out: sysfs gives no line size; --cache L1d=SIZE/WAYS/LINE gives it"]
    );
}

#[test]
fn caches_that_differ_between_cpus_are_noted() {
    let caches = vec![
        sysfs(2, "Unified", 2 << 20, 16, 2048, "0"),
        sysfs(2, "Unified", 4 << 20, 16, 4096, "1-4"),
    ];
    let model = CacheModel::from_header(&caches);
    assert_eq!(model.levels[0].size_bytes, 2 << 20);
    assert_eq!(model.notes.len(), 1);
    assert!(model.notes[0].starts_with("L2: the CPUs' caches differ"));
}

#[test]
fn no_caches_give_an_empty_model() {
    let model = CacheModel::from_header(&[]);
    assert!(model.levels.is_empty());
    assert!(model.notes.is_empty());
}

#[test]
fn overrides_replace_levels_keeping_their_sharing_and_add_new_ones() {
    let overrides = parse_overrides("l1d=48K/12/64, L4=128M/16/64,L2=2m/16/64").expect("valid");
    assert_eq!(
        overrides[0],
        CacheOverride {
            name: "L1d".to_owned(),
            level: 1,
            size_bytes: 48 << 10,
            ways: 12,
            line_bytes: 64,
            sets: 64,
        }
    );
    let model = CacheModel::from_header(&guest()).with_overrides(&overrides, 2);
    let summary: Vec<(&str, u64, u64, GeometrySource, Vec<String>)> = model
        .levels
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.size_bytes,
                l.sets,
                l.source,
                l.instances.clone(),
            )
        })
        .collect();
    let list = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        summary,
        vec![
            (
                "L1d",
                48 << 10,
                64,
                GeometrySource::Override,
                list(&["0", "1"])
            ),
            (
                "L2",
                2 << 20,
                2048,
                GeometrySource::Override,
                list(&["0", "1"])
            ),
            (
                "L3",
                16 << 20,
                16384,
                GeometrySource::Profile,
                list(&["0-1"])
            ),
            (
                "L4",
                128 << 20,
                131_072,
                GeometrySource::Override,
                list(&["0-1"])
            ),
        ]
    );
}

#[test]
fn overrides_fill_a_profile_without_geometry() {
    let overrides = parse_overrides("L1d=32K/8/64,L3=8M/16/64").expect("valid");
    let model = CacheModel::from_header(&[]).with_overrides(&overrides, 4);
    assert_eq!(model.levels[0].instances, ["0", "1", "2", "3"]);
    assert!(model.levels[0].is_private());
    assert_eq!(model.levels[1].instances, ["0-3"]);
    assert_eq!(model.levels[1].shared_cpus, "0-3");
}

#[test]
fn an_override_removes_the_note_of_the_level_it_replaces() {
    let mut caches = guest();
    caches[3] = sysfs(3, "Unified", 30 << 20, 20, 24576, "0-1");
    let model = CacheModel::from_header(&caches)
        .with_overrides(&parse_overrides("L3=32M/16/64").expect("valid"), 2);
    assert!(model.notes.is_empty(), "{:?}", model.notes);
    assert_eq!(model.level("L3").map(|l| l.sets), Some(32768));
}

#[test]
fn bad_cache_specs_name_the_bad_part() {
    let err = |spec: &str| parse_overrides(spec).expect_err(spec).to_string();
    assert_eq!(
        err(""),
        "--cache needs NAME=SIZE/WAYS/LINE, e.g. L1d=48K/12/64,L2=2M/16/64"
    );
    assert_eq!(
        err("L1d=48K/12"),
        "\"L1d=48K/12\": expected NAME=SIZE/WAYS/LINE, e.g. L1d=48K/12/64"
    );
    assert_eq!(
        err("L1d=48K/12/64,"),
        "\"\": expected NAME=SIZE/WAYS/LINE, e.g. L1d=48K/12/64"
    );
    assert_eq!(
        err("L1i=32K/8/64"),
        "\"L1i=32K/8/64\": unknown cache \"L1i\": name a data or unified level, L1d, L2, L3 or L4"
    );
    assert_eq!(
        err("L2=2Q/16/64"),
        "\"L2=2Q/16/64\": size \"2Q\" is not a number of bytes with an optional K or M suffix"
    );
    assert_eq!(
        err("L2=2M/x/64"),
        "\"L2=2M/x/64\": ways \"x\" is not a whole number"
    );
    assert_eq!(
        err("L2=2M/16/-1"),
        "\"L2=2M/16/-1\": line size \"-1\" is not a whole number of bytes"
    );
    assert_eq!(
        err("L2=2M/16/48"),
        "\"L2=2M/16/48\": the line size 48 is not a power of two"
    );
    assert_eq!(
        err("L1d=48K/0/64"),
        "\"L1d=48K/0/64\": 0 ways (fully associative, or unknown)"
    );
    assert_eq!(
        err("L1d=50K/12/64"),
        "\"L1d=50K/12/64\": 51200 bytes is not a multiple of 12 ways x 64-byte lines"
    );
    assert_eq!(
        err("L3=30M/20/64"),
        "\"L3=30M/20/64\": size / (ways x line) = 24576 sets, not a power of two"
    );
    assert_eq!(
        err("L3=4096M/2/64"),
        "\"L3=4096M/2/64\": 2147483648 bytes per way (sets x line) is over 1 GiB: virtual \
         addresses no longer give the set"
    );
    assert_eq!(err("L2=1M/16/64,l2=2M/16/64"), "L2 is given twice");
}

#[test]
fn cpu_lists_parse_and_reject_reversed_ranges() {
    assert_eq!(cpu_list("0-3,8"), Some(vec![0..=3, 8..=8]));
    assert_eq!(cpu_list(" "), Some(vec![]));
    assert_eq!(cpu_list("3-1"), None);
    assert_eq!(cpu_list("x"), None);
}

#[test]
fn lru_keeps_the_most_recent_lines_of_a_set() {
    // One set of two ways: lines 0, 4, 8 (all set 0 of 4 sets).
    let mut c = SetCache::new(4, 2);
    assert_eq!(c.access(0, 1, 0), Outcome::Miss { evicted: None });
    assert_eq!(c.access(4, 2, 0), Outcome::Miss { evicted: None });
    assert_eq!(c.access(0, 1, 0), Outcome::Hit);
    // 4 is now the least recently used: 8 replaces it.
    assert_eq!(c.access(8, 3, 1), Outcome::Miss { evicted: Some(2) });
    assert!(c.contains(0) && c.contains(8) && !c.contains(4));
    // Another set is untouched by all this.
    assert_eq!(c.access(1, 4, 1), Outcome::Miss { evicted: None });
    assert_eq!((c.resident(0), c.resident(1), c.occupied()), (1, 2, 3));
}

#[test]
fn a_freed_objects_lines_leave_and_free_their_way() {
    let mut c = SetCache::new(1, 2);
    c.access(10, 1, 0);
    c.access(11, 2, 0);
    // Only the owner's copy leaves: line 11 belongs to object 2.
    assert!(!c.evict(11, 1));
    assert!(c.evict(10, 1));
    assert_eq!(c.resident(0), 1);
    // The freed way is used before any live line is evicted.
    assert_eq!(c.access(12, 3, 0), Outcome::Miss { evicted: None });
    assert!(c.contains(11) && c.contains(12));
}

#[test]
fn private_levels_are_per_cpu_and_shared_ones_are_not() {
    let model = CacheModel::from_header(&guest());
    let mut h = Hierarchy::new(&model.levels);
    h.access(0, 0x1000, 7, 3);
    h.access(1, 0x1000, 7, 3);
    // L1d and L2 hold a copy per CPU, L3 one.
    assert_eq!(
        (h.resident(0, 3), h.resident(1, 3), h.resident(2, 3)),
        (2, 2, 1)
    );
    assert_eq!(h.capacity(0), 2 * 1024);
    h.free(7, &[0x1000, 0x1008]);
    assert_eq!(
        (h.resident(0, 3), h.resident(1, 3), h.resident(2, 3)),
        (0, 0, 0)
    );
}
