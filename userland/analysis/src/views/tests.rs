//! The views on [`super::example`]'s synthetic profile, whose answers are known from how it
//! was built, and on hand-made lifetimes and histories for the judgement's edge cases.

use super::*;
use crate::pipeline::{self, Options};
use crate::symbols::Kallsyms;
use dprof_fixtures::views::{
    self as example, PAGE, PAGE_OBJECTS, PAIR, SMALL, SWEEP, SWEEP_OBJECTS,
};
use dprof_format::Profile;
use dprof_model::misses::{HistoryJudgement, MissClass, MissReport, TypeMisses};
use dprof_model::working_set::{LinesPerSet, WorkingSetReport};
use dprof_model::Report;

fn analyzed(bytes: Vec<u8>, views: &ViewOptions) -> Report {
    let profile = Profile::from_vec(bytes).expect("valid profile");
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    pipeline::analyze_views(&profile, &kallsyms, &Options::default(), views, &mut |_| {})
        .expect("analysis")
}

fn example_report() -> Report {
    analyzed(example::profile(), &ViewOptions::default())
}

fn misses(report: &Report) -> &MissReport {
    report.misses.as_ref().expect("misses computed")
}

fn working_set(report: &Report) -> &WorkingSetReport {
    report.working_set.as_ref().expect("working set computed")
}

fn classes(t: &TypeMisses) -> Vec<(MissClass, f64)> {
    t.classes.iter().map(|c| (c.class, c.count)).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn without_views_the_report_has_neither_section() {
    let profile = Profile::from_vec(example::profile()).expect("valid profile");
    let report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    assert!(report.misses.is_none());
    assert!(report.working_set.is_none());
}

#[test]
fn false_and_true_sharing_of_two_counters_on_one_line() {
    let report = example_report();
    let m = misses(&report);
    assert!(m.inferred, "the software sampler has no miss bits");
    let pair = m.find_type(PAIR).expect("pair classified");
    assert_eq!(
        pair.history_accesses,
        Some(HistoryJudgement {
            accesses: 6,
            true_sharing: 1,
            false_sharing: 2,
            cannot_tell: 0,
        })
    );
    // Evidence: who wrote, who missed.
    let evidence: Vec<String> = pair
        .sharing
        .iter()
        .map(|e| {
            format!(
                "{}: {} on {} at +{} -> {} on {} at +{}, {} time(s)",
                e.class.name(),
                e.writer.function,
                e.writer.cpu,
                e.writer.offset,
                e.missing.function,
                e.missing.cpu,
                e.missing.offset,
                e.count
            )
        })
        .collect();
    assert_eq!(
        evidence,
        [
            "true sharing: vw_write_a on 1 at +0 -> vw_read_a on 0 at +0, 1 time(s)",
            "false sharing: vw_write_a on 0 at +0 -> vw_write_b on 1 at +8, 1 time(s)",
            "false sharing: vw_write_b on 1 at +8 -> vw_read_a on 0 at +0, 1 time(s)",
        ]
    );
    assert_eq!(pair.sharing[1].writer.ip, example::VW_WRITE_A);
    assert_eq!(pair.sharing[1].missing.ip, example::VW_WRITE_B);
    assert_eq!(pair.sharing[1].missing.size, 8);
    // Samples: vw_write_a at +0 matches two accesses with no invalidation (unclassified);
    // vw_write_b at +8 twice, one false-sharing access; vw_read_a at +0, one false, one
    // true, one neither.
    assert_eq!(pair.total, 4);
    let c = classes(pair);
    let want = [
        (MissClass::TrueSharing, 1.0 / 3.0),
        (MissClass::FalseSharing, 2.0 + 1.0 / 3.0),
        (MissClass::Conflict, 0.0),
        (MissClass::Capacity, 0.0),
        (MissClass::CannotTell, 0.0),
        (MissClass::Unclassified, 1.0 + 1.0 / 3.0),
    ];
    for ((class, got), (want_class, want_count)) in c.iter().zip(want) {
        assert_eq!(*class, want_class);
        assert!(close(*got, want_count), "{class:?}: {got} vs {want_count}");
    }
    let percent: f64 = pair.classes.iter().map(|c| c.percent).sum();
    assert!(close(percent, 100.0), "{percent}");
    assert_eq!(pair.dominant, MissClass::FalseSharing);
    assert!(close(pair.margin, 25.0), "{}", pair.margin);
    assert!(pair.conflict.is_empty());
    assert!(pair.capacity.is_none());
}

#[test]
fn a_line_shared_with_a_neighbour_object_is_cannot_tell_not_false_sharing() {
    let report = example_report();
    let small = misses(&report).find_type(SMALL).expect("small classified");
    assert_eq!(
        small.history_accesses,
        Some(HistoryJudgement {
            accesses: 2,
            true_sharing: 0,
            false_sharing: 0,
            cannot_tell: 2,
        })
    );
    assert!(small.sharing.is_empty(), "{:?}", small.sharing);
    assert_eq!(small.cannot_tell.len(), 2);
    assert!(small.cannot_tell.iter().all(|e| e.neighbour_type == SMALL));
    assert_eq!(small.total, 2);
    assert!(close(small.count(MissClass::CannotTell), 2.0));
    assert!(close(small.count(MissClass::FalseSharing), 0.0));
    assert_eq!(small.dominant, MissClass::CannotTell);
    assert!(close(small.margin, 100.0));
}

#[test]
fn a_single_cpu_profile_has_no_invalidations() {
    let report = analyzed(
        example::profile_with(1, example::guest_caches()),
        &ViewOptions::default(),
    );
    let m = misses(&report);
    for name in [PAIR, SMALL] {
        let t = m.find_type(name).expect("classified");
        let h = t.history_accesses.expect("histories judged");
        assert_eq!(
            (h.true_sharing, h.false_sharing, h.cannot_tell),
            (0, 0, 0),
            "{name}"
        );
        assert!(t.sharing.is_empty() && t.cannot_tell.is_empty(), "{name}");
        for class in [
            MissClass::TrueSharing,
            MissClass::FalseSharing,
            MissClass::CannotTell,
        ] {
            assert!(close(t.count(class), 0.0), "{name} {class:?}");
        }
        assert_eq!(t.dominant, MissClass::Unclassified, "{name}");
    }
    assert!(m
        .notes
        .iter()
        .any(|n| n == "a single CPU: no invalidations"));
}

#[test]
fn a_page_stride_is_flagged_in_exactly_the_sets_it_reaches() {
    let report = example_report();
    let ws = working_set(&report);
    let page = ws.find_type(PAGE).expect("page type");
    let l1 = &page.histograms[0];
    assert_eq!((l1.level.as_str(), l1.sets, l1.ways), ("L1d", 512, 2));
    // 4 KiB apart, 64-byte lines, 512 sets: the set advances by 64 and wraps after 8.
    let expected: Vec<u64> = (0..PAGE_OBJECTS)
        .map(|k| ((example::PAGE_BASE + k * 4096) >> 6) & 511)
        .collect::<std::collections::BTreeSet<u64>>()
        .into_iter()
        .collect();
    assert_eq!(expected, [0, 64, 128, 192, 256, 320, 384, 448]);
    assert_eq!(l1.flagged_sets, expected);
    assert_eq!(l1.max_lines_per_set, PAGE_OBJECTS / 8);
    assert_eq!(
        l1.lines_per_set,
        [
            LinesPerSet {
                lines: 0,
                sets: 504
            },
            LinesPerSet { lines: 4, sets: 8 }
        ]
    );
    assert!(close(l1.mean_lines_per_set, 32.0 / 512.0));
    // L2 has 16 ways: 4 lines per set are no conflict. L3's 16384 sets spread them out.
    assert!(page.histograms[1].flagged_sets.is_empty());
    assert_eq!(page.histograms[2].max_lines_per_set, 1);
    let m = misses(&report).find_type(PAGE).expect("page classified");
    assert_eq!(m.total, PAGE_OBJECTS);
    assert!(close(m.count(MissClass::Conflict), PAGE_OBJECTS as f64));
    assert_eq!(m.dominant, MissClass::Conflict);
    assert_eq!(m.conflict.len(), 1);
    assert_eq!(m.conflict[0].level, "L1d");
    assert_eq!(m.conflict[0].flagged_sets, expected);
    assert_eq!(m.conflict[0].lines_in_flagged_sets, PAGE_OBJECTS);
    assert!(close(m.conflict[0].samples, PAGE_OBJECTS as f64));
    assert!(m.capacity.is_none(), "8 of 512 sets is no capacity problem");
}

#[test]
fn a_sweep_larger_than_l1d_is_capacity_not_conflict() {
    let report = example_report();
    let sweep = working_set(&report).find_type(SWEEP).expect("sweep type");
    let l1 = &sweep.histograms[0];
    // 2048 lines over 512 sets: 4 in each, over the 2 ways but no more than the mean.
    assert_eq!(
        l1.lines_per_set,
        [LinesPerSet {
            lines: 4,
            sets: 512
        }]
    );
    assert!(l1.flagged_sets.is_empty());
    let m = misses(&report).find_type(SWEEP).expect("sweep classified");
    assert!(m.conflict.is_empty());
    let cap = m.capacity.as_ref().expect("capacity");
    assert_eq!(cap.level, "L1d");
    assert_eq!(cap.cache_bytes, 64 << 10);
    assert!(close(cap.sets_covered_fraction, 1.0));
    // Every sampled type's touched lines at once: the sweep, the pages, the pair and the two
    // small objects (one line).
    let lines = SWEEP_OBJECTS + PAGE_OBJECTS;
    assert!(
        cap.working_set_bytes >= lines * 64 && cap.working_set_bytes <= (lines + 2) * 64,
        "{}",
        cap.working_set_bytes
    );
    assert!(close(m.count(MissClass::Capacity), 64.0));
    assert_eq!(m.dominant, MissClass::Capacity);
    assert!(close(m.margin, 100.0));
}

#[test]
fn live_objects_are_exact_at_any_time() {
    let report = example_report();
    let ws = working_set(&report);
    let sweep = ws.find_type(SWEEP).expect("sweep");
    assert_eq!(sweep.peak_objects, SWEEP_OBJECTS);
    assert_eq!(sweep.peak_bytes, SWEEP_OBJECTS * 64);
    assert_eq!(sweep.peak_time_ns, 1_000 + SWEEP_OBJECTS - 1);
    assert_eq!(ws.times_ns.len(), DEFAULT_TIME_POINTS);
    // The slab events' span: from the first allocation (the caches' records at 100 come
    // before it) to the last free.
    assert_eq!(ws.times_ns[0], 1_000);
    assert_eq!(
        *ws.times_ns.last().expect("points"),
        example::SWEEP_FREE_NS + SWEEP_OBJECTS - 1
    );
    for (i, &t) in ws.times_ns.iter().enumerate() {
        let allocated = (t + 1).saturating_sub(1_000).min(SWEEP_OBJECTS);
        let freed = (t + 1)
            .saturating_sub(example::SWEEP_FREE_NS)
            .min(SWEEP_OBJECTS);
        assert_eq!(sweep.live_objects[i], allocated - freed, "at {t}");
        assert_eq!(sweep.live_bytes[i], (allocated - freed) * 64, "at {t}");
    }
    // Time-weighted mean: all 2048 live from 3047 to 900000, ramps at both ends.
    let span = (ws.times_ns[99] - ws.times_ns[0]) as f64;
    let full = (example::SWEEP_FREE_NS - (1_000 + SWEEP_OBJECTS - 1)) as f64;
    let ramps = 2.0 * (SWEEP_OBJECTS as f64 * SWEEP_OBJECTS as f64 / 2.0);
    let mean = (SWEEP_OBJECTS as f64 * full + ramps) / span;
    assert!(
        (sweep.mean_objects - mean).abs() < 2.0,
        "{} vs {mean}",
        sweep.mean_objects
    );

    let profile = Profile::from_vec(example::profile()).expect("valid");
    let live = crate::pipeline::live_index(&profile).expect("index");
    assert_eq!(live.live_objects(SWEEP, 999), 0);
    assert_eq!(live.live_objects(SWEEP, 1_000), 1);
    assert_eq!(live.live_objects(SWEEP, 1_100), 101);
    assert_eq!(
        live.live_objects(SWEEP, example::SWEEP_FREE_NS),
        SWEEP_OBJECTS - 1
    );
    assert_eq!(
        live.live_bytes(PAGE, example::PAGE_FREE_NS - 1),
        PAGE_OBJECTS * 4096
    );
    assert_eq!(
        live.live_objects(PAIR, 20_000),
        0,
        "freed at 20000: not live then"
    );
    assert_eq!(live.live_objects(PAIR, 19_999), 1);
    assert_eq!(live.live_objects("no_such_type", 19_999), 0);
    let mut names: Vec<&str> = live.type_names().collect();
    names.sort_unstable();
    assert_eq!(names, [PAGE, PAIR, SMALL, SWEEP]);
}

#[test]
fn the_simulation_holds_no_more_conflicting_lines_than_the_flagged_sets_have_ways() {
    let report = example_report();
    let ws = working_set(&report);
    let resident = |name: &str, level: &str| {
        ws.find_type(name)
            .and_then(|t| t.resident_lines.iter().find(|r| r.level == level))
            .map_or(f64::NAN, |r| r.mean_lines)
    };
    // The 32 pages fall into 8 L1d sets of 2 ways, on CPU 0 only: at most 16 lines held. L2
    // (16 ways) holds all 32 while they live (most of the profile).
    let live_share = (example::PAGE_FREE_NS - 5_310) as f64 / (ws.times_ns[99] - 100) as f64;
    assert!(resident(PAGE, "L1d") <= 16.0, "{}", resident(PAGE, "L1d"));
    assert!(
        resident(PAGE, "L1d") >= 16.0 * live_share - 1.0,
        "{}",
        resident(PAGE, "L1d")
    );
    assert!(
        (resident(PAGE, "L2") - 32.0 * live_share).abs() < 1.0,
        "{}",
        resident(PAGE, "L2")
    );
    // The sweep's 2048 lines: one CPU's L1d holds 1024 lines at most, its L2 all of them.
    assert!(resident(SWEEP, "L1d") <= 1024.0);
    assert!(resident(SWEEP, "L2") > 1900.0, "{}", resident(SWEEP, "L2"));
    let sim = &ws.simulation;
    let eligible = SWEEP_OBJECTS + PAGE_OBJECTS + 1 + 2;
    assert_eq!((sim.objects, sim.eligible_objects), (eligible, eligible));
    assert_eq!(
        sim.objects_from_paths, 3,
        "the pair and the two small objects"
    );
    // One round per object of each touched line, plus the paths' accesses.
    assert_eq!(sim.accesses, SWEEP_OBJECTS + PAGE_OBJECTS + 6 + 2 * 2);
    assert!(sim.seconds > 0.0 && sim.accesses_per_second > 0.0);
}

#[test]
fn capped_simulations_are_reproducible_and_scaled() {
    let capped = ViewOptions {
        sim_objects: 500,
        ..ViewOptions::default()
    };
    let a = analyzed(example::profile(), &capped);
    let b = analyzed(example::profile(), &capped);
    let sim = &working_set(&a).simulation;
    // The largest 1/2^k of 2083 objects within 500: 2083 / 8.
    assert_eq!(sim.objects, 260);
    assert!(close(sim.sets_fraction, 1.0 / 8.0));
    assert_eq!(sim.eligible_objects, SWEEP_OBJECTS + PAGE_OBJECTS + 3);
    let lines = |r: &Report| -> Vec<(String, String, f64)> {
        working_set(r)
            .types
            .iter()
            .flat_map(|t| {
                t.resident_lines
                    .iter()
                    .map(|l| (t.name.clone(), l.level.clone(), l.mean_lines))
            })
            .collect()
    };
    assert_eq!(lines(&a), lines(&b), "same seed, same answer");
    // Scaled by the share simulated, the sweep's L2 residency is still near all its lines.
    let sweep_l2 = lines(&a)
        .into_iter()
        .find(|(t, l, _)| t == SWEEP && l == "L2")
        .map_or(0.0, |x| x.2);
    assert!((1700.0..2200.0).contains(&sweep_l2), "{sweep_l2}");
    assert!(working_set(&a).notes.iter().any(|n| n.starts_with(
        "260 of 2083 objects simulated (--sim-objects), in caches with 1/8 of each level's sets"
    )));
}

#[test]
fn a_profile_without_geometry_warns_and_leaves_the_cache_parts_empty() {
    let report = analyzed(
        example::profile_with(2, Vec::new()),
        &ViewOptions::default(),
    );
    assert!(report
        .warnings
        .iter()
        .any(|w| w.code == dprof_model::WarningCode::NoCacheGeometry));
    let ws = working_set(&report);
    assert!(ws.geometry.is_empty());
    assert!(ws
        .types
        .iter()
        .all(|t| t.histograms.is_empty() && t.resident_lines.is_empty()));
    assert_eq!(ws.simulation.accesses, 0);
    // Live objects need no geometry.
    assert_eq!(
        ws.find_type(SWEEP).map(|t| t.peak_objects),
        Some(SWEEP_OBJECTS)
    );
    let m = misses(&report);
    assert!(m
        .types
        .iter()
        .all(|t| t.conflict.is_empty() && t.capacity.is_none()));
    // Sharing needs only a line size, assumed.
    let pair = m.find_type(PAIR).expect("pair");
    assert_eq!(pair.history_accesses.map(|h| h.false_sharing), Some(2));
    assert!(m.notes.iter().any(|n| n.contains("64-byte lines (assumed")));
    // --cache supplies what the profile lacks.
    let overridden = analyzed(
        example::profile_with(2, Vec::new()),
        &ViewOptions {
            overrides: crate::cache::parse_overrides("L1d=64K/2/64").expect("valid"),
            ..ViewOptions::default()
        },
    );
    assert!(!overridden
        .warnings
        .iter()
        .any(|w| w.code == dprof_model::WarningCode::NoCacheGeometry));
    let page = misses(&overridden).find_type(PAGE).expect("page");
    assert_eq!(page.conflict[0].flagged_sets.len(), 8);
    assert_eq!(
        working_set(&overridden).geometry[0].source,
        dprof_model::cache::GeometrySource::Override
    );
}

#[test]
fn a_what_if_cache_moves_the_answer() {
    // Eight ways per L1d set hold the 4 lines the page stride puts in each: no conflict.
    let report = analyzed(
        example::profile(),
        &ViewOptions {
            overrides: crate::cache::parse_overrides("L1d=256K/8/64").expect("valid"),
            ..ViewOptions::default()
        },
    );
    let page = misses(&report).find_type(PAGE).expect("page");
    assert!(page.conflict.is_empty());
    assert_eq!(page.dominant, MissClass::Unclassified);
}

#[test]
fn reports_with_views_survive_json() {
    let report = example_report();
    let text = serde_json::to_string(&report).expect("serializes");
    let back: Report = serde_json::from_str(&text).expect("deserializes");
    assert_eq!(back, report);
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        v["misses"]["types"][0]["classes"].as_array().map(Vec::len),
        Some(6)
    );
    assert_eq!(v["misses"]["geometry"][0]["name"], "L1d");
    assert_eq!(v["misses"]["geometry"][0]["source"], "profile");
    assert_eq!(
        v["working_set"]["types"][0]["histograms"][0]["level"],
        "L1d"
    );
    // A report from before the views still reads.
    let mut old = v.clone();
    if let Some(o) = old.as_object_mut() {
        o.remove("misses");
        o.remove("working_set");
    }
    let old: Report = serde_json::from_value(old).expect("old report");
    assert!(old.misses.is_none() && old.working_set.is_none());
}

#[test]
fn with_a_hardware_sampler_the_observed_misses_are_classified() {
    use dprof_fixtures::hardware::{self as hw_example, Sampler};
    let report = analyzed(hw_example::profile(Sampler::Ibs), &ViewOptions::default());
    let m = misses(&report);
    assert!(!m.inferred);
    assert!(m.basis.starts_with("L1 data-cache misses"), "{}", m.basis);
    let (mut checked, mut classified_total, mut samples) = (0, 0, 0);
    for t in &report.data_profile.types {
        let Some(classified) = m.find_type(&t.name) else {
            continue;
        };
        let observed = t.hardware.as_ref().map_or(0, |h| h.misses);
        assert_eq!(classified.total, observed, "{}", t.name);
        let sum: f64 = classified.classes.iter().map(|c| c.count).sum();
        assert!(close(sum, observed as f64), "{}", t.name);
        checked += 1;
        classified_total += classified.total;
        samples += t.samples;
    }
    assert!(checked >= 2, "{checked}");
    assert!(classified_total < samples, "hits are not classified");
}

/// The shared-sets example: which types each set holds at the level's peak, from which sites,
/// conflicted sets first.
#[test]
fn sets_list_the_types_sharing_them_and_where_their_objects_came_from() {
    use dprof_fixtures::shared_sets::{
        self as shared, PAGE_ALLOC, SEND_ACK, SEND_FIN, SPREAD, SPREAD_ALLOC,
    };
    let report = analyzed(shared::profile(), &ViewOptions::default());
    let ws = working_set(&report);
    let levels: Vec<&str> = ws.by_set.iter().map(|l| l.level.as_str()).collect();
    assert_eq!(levels, ["L1d", "L2", "L3"]);
    let l1 = ws.level_sets("L1d").expect("L1d sets");
    assert_eq!(
        (l1.lines, l1.occupied_sets, l1.conflicted_sets),
        (95, 71, 8)
    );
    assert_eq!(l1.sets_left_out, 0);
    // Every object is live from its allocation to the frees: the peak is the last allocation.
    assert_eq!(l1.peak_time_ns, 1_000 + 2 * 16 + 63 - 1);
    let order: Vec<(u64, bool)> = l1.occupied.iter().map(|s| (s.set, s.conflicted)).collect();
    let expected: Vec<(u64, bool)> = (0..8)
        .map(|k| (k * 64, true))
        .chain((1..=63).map(|s| (s, false)))
        .collect();
    assert_eq!(
        order, expected,
        "conflicted sets first, then by lines and index"
    );
    let paths = &report
        .histories
        .as_ref()
        .and_then(|h| h.find_type(shared::SKB))
        .expect("skb histories")
        .paths;
    let route = |site: &dprof_model::working_set::ArrivalSite| -> Vec<String> {
        site.paths
            .iter()
            .map(|&i| paths[i].functions().join(" > "))
            .collect()
    };
    for set in l1.occupied.iter().filter(|s| s.conflicted) {
        assert_eq!(set.lines, 4, "set {}", set.set);
        // Two lines of each type fit the 2 ways: only both types together conflict.
        assert!(set.types.iter().all(|t| !t.flagged), "set {}", set.set);
        let types: Vec<(&str, u64, u64)> = set
            .types
            .iter()
            .map(|t| (t.name.as_str(), t.objects, t.lines))
            .collect();
        assert_eq!(
            types,
            [(shared::PAGE, 2, 2), (shared::SKB, 2, 2)],
            "set {}",
            set.set
        );
        let page_sites: Vec<(&str, u64)> = set.types[0]
            .sites
            .iter()
            .map(|s| (s.function.as_str(), s.objects))
            .collect();
        assert_eq!(page_sites, [(PAGE_ALLOC, 2)]);
        assert!(
            set.types[0].sites[0].paths.is_empty(),
            "no history of pages"
        );
        let skb = &set.types[1];
        let sites: Vec<(&str, u64, Vec<String>)> = skb
            .sites
            .iter()
            .map(|s| (s.function.as_str(), s.objects, route(s)))
            .collect();
        assert_eq!(
            sites,
            [
                (
                    SEND_ACK,
                    1,
                    vec!["ss_send_ack > vw_read_a > vw_free".to_owned()]
                ),
                (
                    SEND_FIN,
                    1,
                    vec!["ss_send_fin > vw_write_a > vw_free".to_owned()]
                ),
            ],
            "set {}",
            set.set
        );
    }
    let spread = l1.occupied.last().expect("spread sets");
    assert_eq!(spread.lines, 1);
    assert_eq!(spread.types.len(), 1);
    assert_eq!(
        (spread.types[0].name.as_str(), spread.types[0].objects),
        (SPREAD, 1)
    );
    assert_eq!(spread.types[0].sites[0].function, SPREAD_ALLOC);
    assert!(
        ws.notes.iter().any(|n| n.starts_with("by set: ")
            && n.contains("objects arrive through their allocation sites")),
        "{:?}",
        ws.notes
    );
}

/// The shared-sets example at the levels with more ways and more sets: nothing conflicted.
#[test]
fn more_ways_or_more_sets_leave_the_shared_sets_unconflicted() {
    let report = analyzed(
        dprof_fixtures::shared_sets::profile(),
        &ViewOptions::default(),
    );
    let ws = working_set(&report);
    // Sixteen ways hold four lines; in L3 every page has its own set.
    let l2 = ws.level_sets("L2").expect("L2 sets");
    assert_eq!((l2.conflicted_sets, l2.occupied_sets), (0, 71));
    assert_eq!(l2.occupied.first().map(|s| (s.set, s.lines)), Some((0, 4)));
    let l3 = ws.level_sets("L3").expect("L3 sets");
    assert_eq!(
        (l3.conflicted_sets, l3.occupied_sets, l3.lines),
        (0, 95, 95)
    );
    assert!(l3
        .occupied
        .iter()
        .all(|s| s.lines == 1 && s.types.len() == 1));
}

/// Without histories a set's objects still name their sites, and the view says the paths are
/// only those.
#[test]
fn without_histories_the_sets_say_paths_are_allocation_sites_only() {
    let report = analyzed(
        example::profile_with(2, Vec::new()),
        &ViewOptions::default(),
    );
    assert!(
        working_set(&report).by_set.is_empty(),
        "no geometry, no sets"
    );
    let views = ViewOptions {
        overrides: crate::cache::parse_overrides("L1d=32K/8/64").expect("valid"),
        ..ViewOptions::default()
    };
    let report = analyzed(dprof_fixtures::data_profile::profile(), &views);
    let ws = working_set(&report);
    assert!(
        ws.notes
            .iter()
            .any(|n| n.contains("no object access histories")),
        "{:?}",
        ws.notes
    );
    let l1 = ws.level_sets("L1d").expect("L1d sets");
    assert!(l1.occupied.iter().all(|s| s
        .types
        .iter()
        .all(|t| !t.sites.is_empty() && t.sites.iter().all(|site| site.paths.is_empty()))));
}

/// The sweep's 2048 lines occupy as many L3 sets: the list keeps the busiest, counts the rest
/// and says so.
#[test]
fn a_level_with_more_occupied_sets_than_listed_counts_the_rest() {
    let report = example_report();
    let ws = working_set(&report);
    let l3 = ws.level_sets("L3").expect("L3 sets");
    assert!(l3.occupied_sets > by_set::MAX_SETS_LISTED as u64);
    assert_eq!(l3.occupied.len(), by_set::MAX_SETS_LISTED);
    assert_eq!(
        l3.sets_left_out,
        l3.occupied_sets - by_set::MAX_SETS_LISTED as u64
    );
    assert!(l3
        .occupied
        .windows(2)
        .all(|w| (w[0].conflicted, w[0].lines) >= (w[1].conflicted, w[1].lines)));
    assert!(
        ws.notes
            .iter()
            .any(|n| n.contains(&format!("L3 {}", l3.sets_left_out))),
        "{:?}",
        ws.notes
    );
    // At the level's peak the sweep fills every L1d set with 4 lines; the page stride's sets
    // hold 4 more, 8 in all, short of twice the mean (4.06): busiest, but not conflicted for
    // all types together, though the pages' own histogram flags them.
    let l1 = ws.level_sets("L1d").expect("L1d sets");
    assert_eq!(l1.conflicted_sets, 0);
    let first = l1.occupied.first().expect("occupied");
    assert_eq!((first.set, first.lines), (0, 8));
    let types: Vec<(&str, u64, u64)> = first
        .types
        .iter()
        .map(|t| (t.name.as_str(), t.objects, t.lines))
        .collect();
    assert_eq!(types, [(PAGE, 4, 4), (SWEEP, 4, 4)]);
    let flagged: Vec<bool> = first.types.iter().map(|t| t.flagged).collect();
    assert_eq!(
        flagged,
        [true, false],
        "the pages' own histogram flags the set"
    );
    // The 8 sets the pages' histogram flags come first, though every set holds 4 lines or more.
    let leading: Vec<u64> = l1.occupied.iter().take(8).map(|s| s.set).collect();
    assert_eq!(leading, (0..8).map(|k| k * 64).collect::<Vec<_>>());
    assert!(!l1.occupied[8].types.iter().any(|t| t.flagged));
}

/// Records after the last slab event (a causal profile's experiments trace no allocation) do
/// not stretch the views' span, so they do not dilute the mean live objects.
#[test]
fn the_views_cover_the_span_of_the_slab_events() {
    use crate::views::Recorded;
    let report = example_report();
    let ws = working_set(&report);
    let last = *ws.times_ns.last().expect("points");
    let mut records = example::records(2);
    let late = records
        .iter()
        .find(|(_, _, r)| matches!(r, dprof_abi::Record::AccessSample(_)))
        .map(|(cpu, _, r)| (*cpu, last + 50_000_000, *r))
        .expect("a sample");
    records.push(late);
    let with_late = analyzed(
        example::profile_of(2, example::guest_caches(), records),
        &ViewOptions::default(),
    );
    let ws_late = working_set(&with_late);
    assert_eq!(ws_late.times_ns.last(), Some(&last));
    let sweep = |w: &WorkingSetReport| w.find_type(SWEEP).expect("sweep").mean_objects;
    assert!((sweep(ws_late) - sweep(ws)).abs() < 1e-9);
    // No allocation: no events' span.
    assert_eq!(Recorded::default().events_span(), None);
}
