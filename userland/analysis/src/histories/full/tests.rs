//! Whole-object histories of `dprof_fixtures::full_histories`, and the merge on hand-made
//! sets whose timing misleads.

use dprof_fixtures::full_histories::{self as example, FC_FILL, FC_TYPE, FC_USE};
use dprof_format::Profile;
use dprof_model::histories::{EndReason, FullCoverage, HitCheck, MergedPath, SetCost, Span};
use dprof_model::AccessKind::{self, Read, Write};

use super::{match_sets, merge_set, tries_of};
use crate::histories::{assemble, report, History, HistoryEnding, Hit};
use crate::pipeline::{self, AccessStats, Options, SampledAccesses};
use crate::symbols::Kallsyms;
use dprof_model::{MemSource, SourceCount};

fn full_of_example() -> FullCoverage {
    let profile = Profile::from_vec(example::profile()).expect("valid profile");
    let report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    let histories = report.histories.expect("histories section");
    let t = histories.find_type(FC_TYPE).expect("type");
    t.full.clone().expect("a whole-object view")
}

const fn chunk(offset: u32) -> Span {
    Span { offset, len: 8 }
}

/// `(function+offset, chunk offset, kind, CPU label, CPU change, mean ns since alloc)` of
/// each step.
fn steps(path: &MergedPath) -> Vec<(String, u32, Option<AccessKind>, u32, bool, u64)> {
    path.steps
        .iter()
        .map(|s| {
            (
                format!("{}+{:#x}", s.function, s.function_offset),
                s.chunk.offset,
                s.kind,
                s.cpu,
                s.cpu_change,
                s.mean_since_alloc_ns,
            )
        })
        .collect()
}

#[test]
fn matched_histories_merge_into_the_objects_path() {
    let f = full_of_example();
    assert_eq!(f.object_size, 32);
    assert_eq!(f.chunks, vec![chunk(0), chunk(8), chunk(0x10), chunk(0x18)]);
    assert_eq!(f.targets, 6);
    // Rounds 1 to 5 are complete, 6 is not: five sets, and round 6's histories of targets 1
    // to 5 unused. Round 5's history of chunks 2 and 3 read chunk 3 twice, unlike any other:
    // the best its target had for set 5, it orders nothing there.
    assert_eq!((f.rounds, f.incomplete_rounds), (5, 1));
    assert_eq!((f.sets, f.unmatched_histories), (5, 5));
    assert_eq!((f.unmerged_histories, f.cycles_broken), (1, 0));
    assert_eq!(f.paths.len(), 2);
    let common = &f.paths[0];
    assert_eq!((common.sets, common.share), (4, 0.8));
    assert_eq!(
        (common.alloc_function.as_str(), common.end.as_str()),
        ("fc_alloc", "fc_free")
    );
    // Chunk 1 is never touched; the object moves to another CPU (label 1) before `fc_use`,
    // in set 3 from CPU 2 to CPU 3 as in the others from 0 to 1.
    assert_eq!(
        steps(common),
        vec![
            ("fc_fill+0x0".to_owned(), 0, Some(Write), 0, false, 100),
            ("fc_fill+0x3".to_owned(), 0x10, Some(Write), 0, false, 200),
            ("fc_use+0x0".to_owned(), 0x10, Some(Read), 1, true, 1_000),
            ("fc_use+0x4".to_owned(), 0x18, Some(Read), 1, false, 1_100),
        ]
    );
    assert_eq!(common.steps[0].ip, FC_FILL);
    assert_eq!(common.steps[3].ip, FC_USE + 4);
    assert!(common.steps.iter().all(|s| s.instruction_found));
    assert_eq!((common.end_cpu, common.end_cpu_change), (1, false));
    // Set 4: the same accesses, all on the allocating CPU.
    let local = &f.paths[1];
    assert_eq!(local.sets, 1);
    let cpus: Vec<(u32, bool)> = local.steps.iter().map(|s| (s.cpu, s.cpu_change)).collect();
    assert_eq!(cpus, vec![(0, false); 4]);
    assert_eq!((local.end_cpu, local.end_cpu_change), (0, false));
}

/// The fixture's software samples hit `fc_fill+0x0` on chunk 0 twice and `fc_use+0x0` on
/// chunk 2 once: the merged steps of those instructions and chunks carry them, as the path
/// traces' steps do, with no outcome (the software sampler sees none).
#[test]
fn merged_steps_carry_the_samples_of_their_instruction_and_chunk() {
    let profile = Profile::from_vec(example::profile()).expect("valid profile");
    let report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    let histories = report.histories.expect("histories section");
    let t = histories.find_type(FC_TYPE).expect("type");
    let full = t.full.as_ref().expect("a whole-object view");
    for path in &full.paths {
        let samples: Vec<Option<u64>> = path
            .steps
            .iter()
            .map(|s| s.sampled.as_ref().map(|m| m.samples))
            .collect();
        assert_eq!(samples, vec![Some(2), None, Some(1), None]);
        let first = path.steps[0].sampled.as_ref().expect("sampled");
        assert_eq!((first.hw_samples, first.misses), (0, None));
        assert!(first.sources.is_empty());
    }
    // The same join as the pairwise steps of the same instruction and chunk.
    let pairwise = t
        .paths
        .iter()
        .flat_map(|p| &p.elements)
        .find(|e| e.ip == FC_USE && e.range == chunk(0x10))
        .expect("a pairwise step of fc_use+0x0");
    assert_eq!(pairwise.sampled, full.paths[0].steps[2].sampled);
}

/// With a hardware sampler a merged step says where its data came from: the samples of its
/// instruction and chunk, no other step's.
#[test]
fn merged_steps_say_where_their_data_came_from_with_a_hardware_sampler() {
    let profile = Profile::from_vec(example::profile()).expect("valid profile");
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let histories = assemble(&profile, &kallsyms).expect("records read");
    let mut sources = [0; MemSource::ALL.len()];
    sources[MemSource::L1.index()] = 3;
    sources[MemSource::Dram.index()] = 1;
    let mut sampled = SampledAccesses::default();
    sampled.insert(
        FC_TYPE,
        FC_USE,
        0x10,
        AccessStats {
            samples: 4,
            reads: 4,
            hw_samples: 4,
            misses: 1,
            latency_samples: 1,
            latency_sum: 300,
            sources,
            ..AccessStats::default()
        },
    );
    let r = report(&histories, &kallsyms, Some(&sampled));
    let full = r
        .find_type(FC_TYPE)
        .and_then(|t| t.full.as_ref())
        .expect("a whole-object view");
    let steps = &full.paths[0].steps;
    let read = steps[2].sampled.as_ref().expect("fc_use+0x0 sampled");
    assert_eq!((steps[2].ip, steps[2].chunk), (FC_USE, chunk(0x10)));
    assert_eq!(
        (read.samples, read.hw_samples, read.misses),
        (4, 4, Some(1))
    );
    assert_eq!(read.miss_rate, Some(0.25));
    assert_eq!(read.mean_latency_cycles, Some(300.0));
    assert_eq!(
        read.sources,
        vec![
            SourceCount {
                source: MemSource::L1,
                samples: 3
            },
            SourceCount {
                source: MemSource::Dram,
                samples: 1
            },
        ]
    );
    let others: Vec<bool> = steps.iter().map(|s| s.sampled.is_some()).collect();
    assert_eq!(others, vec![false, false, true, false]);
}

#[test]
fn distinct_paths_converge_by_set() {
    let f = full_of_example();
    assert_eq!(f.distinct_paths_after, vec![1, 1, 1, 2, 2]);
    assert_eq!(f.last_new_path_at, 4);
    assert_eq!(f.sets_without_new_path(), 1);
}

#[test]
fn each_round_costs_its_tries_and_the_sets_all_of_them() {
    let f = full_of_example();
    let set = |set, complete, histories, complete_histories, hits, wall_ns| SetCost {
        set,
        complete,
        histories,
        complete_histories,
        hits,
        wall_ns,
    };
    // Six histories 2 us apart, each freed 1.3 us after its allocation; set 2 retried a
    // target whose first try timed out (5 us, 6 us to the next), set 5 has one hit more, set
    // 6's last target timed out after one hit.
    assert_eq!(
        f.cost,
        vec![
            set(1, true, 6, 6, 12, 11_300),
            set(2, true, 7, 6, 12, 17_300),
            set(3, true, 6, 6, 12, 11_300),
            set(4, true, 6, 6, 12, 11_300),
            set(5, true, 6, 6, 13, 11_300),
            set(6, false, 6, 5, 10, 15_000),
        ]
    );
    assert_eq!(f.total_cost, set(0, false, 37, 35, 71, 77_500));
    // Over the five merged sets.
    assert_eq!(f.mean_histories_per_set(), Some(7.4));
    assert_eq!(f.mean_hits_per_set(), Some(14.2));
    assert_eq!(f.mean_wall_ns_per_set(), Some(15_500));
}

#[test]
fn types_collected_without_full_have_no_whole_object_view() {
    let profile = Profile::from_vec(dprof_fixtures::histories::profile()).expect("valid profile");
    let report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    let histories = report.histories.expect("histories section");
    assert!(histories.types.iter().all(|t| t.full.is_none()));
}

/// Three functions at known addresses, for hand-made histories.
const KALLSYMS: &str = "\
ffffffff81c00000 t first\n\
ffffffff81c00100 t second\n\
ffffffff81c00200 t third\n\
ffffffff81c00300 t last\n";
const FIRST: u64 = 0xffff_ffff_81c0_0000;

/// A history of one object watching `chunks`, with `hits` as `(chunk, ip, kind, cpu, ns
/// since alloc)`, allocated and freed on CPU 0.
fn history(id: u64, chunks: [u32; 2], hits: &[(u32, u64, AccessKind, u32, u64)]) -> History {
    let start_ns = id * 10_000;
    let mut prev_cpu = 0;
    History {
        id,
        type_name: "hand".to_owned(),
        object: 0x1000 * id,
        alloc_site: FIRST + 0x300,
        target: id as u32,
        ranges: chunks.iter().map(|&c| chunk(c)).collect(),
        start_ns,
        start_cpu: 0,
        arms: Vec::new(),
        end: Some(HistoryEnding {
            reason: EndReason::Freed,
            time_ns: start_ns + 5_000,
            cpu: 0,
            free_site: FIRST + 0x301,
            hits: hits.len() as u32,
            dropped_hits: 0,
            lifetime_ns: 5_000,
        }),
        hits: hits
            .iter()
            .enumerate()
            .map(|(seq, &(c, ip, kind, cpu, since))| {
                let cpu_change = cpu != prev_cpu;
                prev_cpu = cpu;
                Hit {
                    time_ns: start_ns + since,
                    since_alloc_ns: since,
                    cpu,
                    cpu_change,
                    trap_ip: ip + 4,
                    insn_ip: Some(ip),
                    mnemonic: None,
                    range: chunk(c),
                    kind: Some(kind),
                    size: Some(8),
                    check: HitCheck::Verified,
                    seq: seq as u32,
                    pid: 1,
                    tid: 1,
                }
            })
            .collect(),
        late_hits: 0,
    }
}

const A: u64 = FIRST;
const B: u64 = FIRST + 0x100;
const C: u64 = FIRST + 0x200;

/// Two paths interleaved across rounds: target 1's histories (chunks 0 and 8) take path X
/// then Y, target 2's (chunks 8 and 0x10) Y then X. Chunk 8, which both watch, tells the
/// paths apart (B writes it on path X, C on path Y): the sets pair X with X and Y with Y,
/// not round with round; target 1's third history finds no partner left.
#[test]
fn sets_match_histories_whose_shared_chunks_agree_not_rounds() {
    let x1 = history(1, [0, 8], &[(0, A, Write, 0, 100), (8, B, Write, 0, 200)]);
    let y1 = history(2, [0, 8], &[(0, A, Write, 0, 100), (8, C, Write, 0, 200)]);
    let y2 = history(
        3,
        [8, 0x10],
        &[(8, C, Write, 0, 200), (0x10, A, Read, 0, 300)],
    );
    let x2 = history(
        4,
        [8, 0x10],
        &[(8, B, Write, 0, 200), (0x10, B, Read, 0, 300)],
    );
    // A third history of target 1 whose path no history of target 2 took.
    let z1 = history(5, [0, 8], &[(8, A, Read, 0, 50)]);
    let pools = vec![vec![x1, y1, z1], vec![y2, x2]];
    assert_eq!(match_sets(&pools), vec![vec![0, 1], vec![1, 0]]);
    // Nothing to match from.
    assert!(match_sets(&[]).is_empty());
    assert!(match_sets(&[Vec::new(), pools[1].clone()]).is_empty());
}

/// The functions of a merged set's steps, in order.
fn merged_functions(set: &[History]) -> (Vec<u64>, u64, u64) {
    let kallsyms = Kallsyms::parse(KALLSYMS.as_bytes());
    let merged = merge_set(set, &kallsyms);
    (
        merged.key.steps.iter().map(|s| s.ip).collect(),
        merged.unmerged,
        merged.cycles_broken,
    )
}

/// The objects do B, then A, then C; one object was slow between A and C, so that time alone
/// would put C before A. The pairs' interleavings keep the true order.
#[test]
fn interleavings_order_what_time_would_misorder() {
    let set = [
        history(1, [0, 8], &[(8, B, Read, 0, 100), (0, A, Write, 0, 200)]),
        history(
            2,
            [0, 0x10],
            &[(0, A, Write, 0, 900), (0x10, C, Read, 0, 1_000)],
        ),
        history(3, [8, 0x10], &[(8, B, Read, 0, 50), (0x10, C, Read, 0, 60)]),
    ];
    // Mean times: B 75, A 550, C 530.
    assert_eq!(merged_functions(&set), (vec![B, A, C], 0, 0));
}

/// A history whose accesses to a chunk differ from the chunk's reference orders nothing: its
/// order (C before A) is not followed, and it is counted.
#[test]
fn a_history_that_disagrees_is_left_out_and_counted() {
    let set = [
        history(1, [0, 8], &[(8, B, Read, 0, 100), (0, A, Write, 0, 200)]),
        // A read of chunk 0 by B's instruction the reference never saw.
        history(
            2,
            [0, 0x10],
            &[
                (0x10, C, Read, 0, 150),
                (0, B, Read, 0, 160),
                (0, A, Write, 0, 170),
            ],
        ),
        history(
            3,
            [8, 0x10],
            &[(8, B, Read, 0, 50), (0x10, C, Read, 0, 600)],
        ),
    ];
    // Without history 2, A and C are ordered by time: A (200) before C (600).
    assert_eq!(merged_functions(&set), (vec![B, A, C], 1, 0));
}

/// Orderings that contradict each other (A before B, B before C, C before A) make a cycle,
/// broken by time and counted.
#[test]
fn contradicting_pairs_make_a_cycle_broken_by_time() {
    let set = [
        history(1, [0, 8], &[(0, A, Write, 0, 100), (8, B, Read, 0, 200)]),
        history(
            2,
            [0, 0x10],
            &[(0x10, C, Read, 0, 300), (0, A, Write, 0, 400)],
        ),
        history(
            3,
            [8, 0x10],
            &[(8, B, Read, 0, 500), (0x10, C, Read, 0, 600)],
        ),
    ];
    // Mean times: A 250, B 350, C 450; A goes first, then the order holds.
    assert_eq!(merged_functions(&set), (vec![A, B, C], 0, 1));
}

/// CPU labels count CPUs in order of first appearance within the history an access comes
/// from: CPU 5 after allocation on CPU 0 is label 1.
#[test]
fn cpu_labels_number_cpus_in_order_of_appearance() {
    let set = [
        history(1, [0, 8], &[(0, A, Write, 5, 100), (8, B, Read, 7, 200)]),
        history(
            2,
            [0, 0x10],
            &[(0, A, Write, 3, 100), (0x10, C, Read, 0, 300)],
        ),
        history(
            3,
            [8, 0x10],
            &[(8, B, Read, 2, 200), (0x10, C, Read, 0, 300)],
        ),
    ];
    let kallsyms = Kallsyms::parse(KALLSYMS.as_bytes());
    let merged = merge_set(&set, &kallsyms);
    let labels: Vec<u32> = merged.key.steps.iter().map(|s| s.cpu).collect();
    assert_eq!(labels, vec![1, 2, 0]);
    // Freed on CPU 0 in history 2, the source of the last step (C): label 0.
    assert_eq!(merged.key.end_cpu, 0);
}

/// Only a traced free completes a target's history for a set: a reallocated object's free
/// is unknown, and it counts as a failed try, as a timeout does.
#[test]
fn a_reallocated_or_timed_out_history_is_a_failed_try() {
    let ended = |id, reason| {
        let mut h = history(id, [0, 8], &[(0, A, Write, 0, 100)]);
        if let Some(end) = h.end.as_mut() {
            end.reason = reason;
        }
        h
    };
    let list = [
        ended(1, EndReason::Reallocated),
        ended(2, EndReason::Freed),
        ended(3, EndReason::Timeout),
    ];
    let tries = tries_of(list.iter());
    let shape: Vec<(Vec<u64>, Option<u64>)> = tries
        .iter()
        .map(|t| {
            (
                t.histories.iter().map(|h| h.id).collect(),
                t.complete.map(|h| h.id),
            )
        })
        .collect();
    assert_eq!(shape, vec![(vec![1, 2], Some(2)), (vec![3], None)]);
}
