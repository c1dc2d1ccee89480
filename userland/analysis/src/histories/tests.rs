//! Histories, path traces and data flow of `dprof_fixtures::histories`.

use dprof_abi::{HistoryHit, HistoryStart};

use super::assemble::{assemble_collected, Collected};
use super::*;
use crate::pipeline::{self, AccessStats, Options};
use crate::symbols::Kallsyms;
use dprof_fixtures::histories::{
    self as example, OBJ1, ST_ALLOC, ST_CONSUMER, ST_FREE, ST_PRODUCER, ST_TYPE, ST_UNTRACED,
};
use dprof_format::KernelText;
use dprof_format::Profile;
use dprof_model::histories::EmptyFlowReason;
use dprof_model::histories::FlowRange;
use dprof_model::histories::FlowRole;
use dprof_model::histories::HistoryReport;
use dprof_model::histories::HitCheck;
use dprof_model::histories::NoCode;
use dprof_model::histories::Unverifiable;
use dprof_model::AccessKind;
use dprof_model::AccessKind::{Read, ReadWrite, Write};

fn example_profile() -> Profile {
    Profile::from_vec(example::profile()).expect("valid profile")
}

fn assembled() -> Histories {
    let profile = example_profile();
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    assemble(&profile, &kallsyms).expect("records read")
}

fn full_report() -> HistoryReport {
    let profile = example_profile();
    pipeline::analyze(&profile, &Options::default())
        .expect("analysis")
        .histories
        .expect("histories section")
}

#[test]
fn hits_are_found_checked_and_ordered() {
    let h = assembled();
    assert_eq!(h.histories.len(), 4);
    assert_eq!(h.orphan_hits, 0);
    let first = &h.histories[0];
    assert_eq!(first.id, 1);
    assert_eq!(first.type_name, ST_TYPE);
    assert_eq!(first.object, OBJ1);
    assert_eq!(first.ranges.len(), 2);
    assert_eq!(first.arms, vec![(1, 300), (2, 350)]);
    assert!(first.is_complete());
    let found: Vec<(Option<u64>, Option<AccessKind>, HitCheck)> = first
        .hits
        .iter()
        .map(|hit| (hit.insn_ip, hit.kind, hit.check))
        .collect();
    assert_eq!(
        found,
        vec![
            (Some(ST_ALLOC + 4), Some(Write), HitCheck::Verified),
            (Some(ST_PRODUCER + 4), Some(Write), HitCheck::Verified),
            (Some(ST_PRODUCER + 8), Some(Read), HitCheck::Verified),
            (Some(ST_CONSUMER + 1), Some(Read), HitCheck::Verified),
            (
                Some(ST_CONSUMER + 5),
                Some(Read),
                HitCheck::Unverifiable(Unverifiable::RegisterClobbered)
            ),
            (Some(ST_FREE), Some(ReadWrite), HitCheck::Verified),
        ]
    );
    // Time since allocation, CPUs and the one CPU change (producer on 0, consumer on 1).
    let since: Vec<u64> = first.hits.iter().map(|h| h.since_alloc_ns).collect();
    assert_eq!(since, vec![100, 200, 300, 1000, 1100, 1200]);
    let changes: Vec<bool> = first.hits.iter().map(|h| h.cpu_change).collect();
    assert_eq!(changes, vec![false, false, false, true, false, false]);
    assert_eq!(first.cpu_changes(), 1);
    assert_eq!(first.hits[1].mnemonic.as_deref(), Some("mov"));
    assert_eq!(first.hits[5].mnemonic.as_deref(), Some("inc"));
}

#[test]
fn a_hit_after_the_end_is_dropped_even_when_it_comes_later_in_the_file() {
    let h = assembled();
    let second = &h.histories[1];
    assert_eq!(second.late_hits, 1);
    assert_eq!(second.hits.len(), 6);
    assert!(second.hits.iter().all(|hit| hit.cpu != 2));
}

#[test]
fn mismatches_and_missing_code_are_counted_not_guessed() {
    let h = assembled();
    let third = &h.histories[2];
    assert_eq!(third.hits[1].check, HitCheck::Mismatched);
    // Found and decoded all the same: the instruction is right, the address is not.
    assert_eq!(third.hits[1].insn_ip, Some(ST_PRODUCER + 4));
    assert_eq!(third.hits[3].check, HitCheck::NoCode(NoCode::NoBytes));
    assert_eq!(third.hits[3].insn_ip, None);
    assert_eq!(third.hits[3].ip(), ST_UNTRACED + 0x10);
    assert_eq!(third.cpu_changes(), 0);
    let c = h.checks;
    // 6 + 6 + 6 + 1 hits kept: 2 clobbered, 1 mismatch, 1 no code.
    assert_eq!(c.verified, 15, "{c}");
    assert_eq!(c.mismatched, 1);
    assert_eq!(c.unverifiable_clobbered, 2);
    assert_eq!(c.no_code_bytes, 1);
    assert_eq!(c.no_code(), 1);
    assert_eq!(
        c.to_string(),
        "15 verified, 1 mismatched, 2 unverifiable (2 register clobbered), 1 no code (1 no bytes)"
    );
}

#[test]
fn trap_ips_between_instructions_or_without_symbols_are_no_code() {
    let text = example::text();
    let kallsyms = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let mut code = code::CodeIndex::new(&text, &kallsyms);
    // Inside `mov %rax,0x10(%rdi)`: no instruction ends there.
    assert_eq!(
        code.accessing_instruction(ST_PRODUCER + 6),
        Err(NoCode::NoBoundary)
    );
    assert_eq!(code.accessing_instruction(0x1000), Err(NoCode::NoSymbol));
    assert_eq!(
        code.accessing_instruction(ST_PRODUCER + 8).map(|i| i.ip),
        Ok(ST_PRODUCER + 4)
    );
}

#[test]
fn a_hit_keeps_the_address_registers_of_its_accessing_instruction_and_none_without_one() {
    use dprof_abi::reg;
    let text = example::text();
    let kallsyms = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let at = |trap_ip| hit_registers(&text, &kallsyms, trap_ip);
    // After `mov 0x18(%rdi),%ecx` and `mov 0x18(%rdi),%rdi` (which overwrote %rdi).
    assert_eq!(at(ST_PRODUCER + 0xb), Some(1 << reg::RDI));
    assert_eq!(at(ST_CONSUMER + 9), Some(1 << reg::RDI));
    // After `push %rbp`: the stack.
    assert_eq!(at(ST_ALLOC + 1), Some(1 << reg::RSP));
    // After `mov %rsp,%rbp`: no memory, no register read.
    assert_eq!(at(ST_ALLOC + 4), Some(0));
    // Inside an instruction, without code, without a symbol: no instruction.
    assert_eq!(at(ST_PRODUCER + 6), None);
    assert_eq!(at(ST_UNTRACED + 0x10), None);
    assert_eq!(at(0x1000), None);
}

#[test]
fn at_a_function_s_first_byte_a_hit_keeps_the_registers_of_both_candidates() {
    use dprof_abi::reg;
    // `f`: mov (%r8),%al ending at `g`, which starts with rep movsb.
    let mut text = KernelText::new();
    text.insert(ST_ALLOC, &[0x41, 0x8a, 0x00, 0xf3, 0xa4, 0xc3]);
    let kallsyms = Kallsyms::parse(b"ffffffff81a00000 T f\nffffffff81a00003 T g\n");
    let both = (1 << reg::R8) | (1 << reg::RSI) | (1 << reg::RDI);
    assert_eq!(hit_registers(&text, &kallsyms, ST_ALLOC + 3), Some(both));
    // The analysis takes `f`'s instruction: its registers are among those kept.
    let mut code = code::CodeIndex::new(&text, &kallsyms);
    let insn = code.accessing_instruction(ST_ALLOC + 3).expect("found");
    assert_eq!(insn.address_registers(), 1 << reg::R8);
}

#[test]
fn a_rep_string_op_trapping_on_itself_is_found_and_unverifiable() {
    // rep movsb at the start of a function: a trap mid-copy reports the instruction itself.
    let mut text = KernelText::new();
    text.insert(ST_ALLOC, &[0xf3, 0xa4, 0xc3]);
    let kallsyms = Kallsyms::parse(b"ffffffff81a00000 T memcpy_ish\nffffffff81a00010 T next\n");
    let collected = Collected {
        starts: vec![(
            dprof_abi::RecordHeader {
                kind: 0,
                cpu: 0,
                size: 0,
                time_ns: 1,
            },
            HistoryStart {
                history: 1,
                object: OBJ1,
                cache: 0xdead_0000,
                ranges: dprof_abi::history_ranges(&example::PAIR),
                ..HistoryStart::default()
            },
        )],
        ..Collected::default()
    };
    let mut collected = collected;
    collected.hits.insert(
        1,
        vec![
            (
                dprof_abi::RecordHeader {
                    kind: 0,
                    cpu: 0,
                    size: 0,
                    time_ns: 2,
                },
                HistoryHit {
                    history: 1,
                    ip: ST_ALLOC,
                    ..HistoryHit::default()
                },
            ),
            (
                dprof_abi::RecordHeader {
                    kind: 0,
                    cpu: 0,
                    size: 0,
                    time_ns: 3,
                },
                HistoryHit {
                    history: 1,
                    ip: ST_ALLOC + 2,
                    seq: 1,
                    ..HistoryHit::default()
                },
            ),
        ],
    );
    let h = assemble_collected(collected, &text, &kallsyms, &[]);
    let hits = &h.histories[0].hits;
    assert_eq!(
        hits[0].check,
        HitCheck::Unverifiable(Unverifiable::ImplicitOperands)
    );
    assert_eq!(hits[0].insn_ip, Some(ST_ALLOC));
    assert_eq!(hits[1].insn_ip, Some(ST_ALLOC));
    assert_eq!(hits[0].kind, None);
    // Not a history of a known cache: named by its address, never dropped.
    assert!(
        h.histories[0].type_name.starts_with("cache@"),
        "{}",
        h.histories[0].type_name
    );
}

#[test]
fn path_traces_group_identical_histories() {
    let r = full_report();
    assert_eq!(r.histories, 4);
    assert_eq!(r.complete, 3);
    assert_eq!(r.late_hits, 1);
    let t = r.find_type(ST_TYPE).expect("st_obj");
    assert_eq!(t.histories, 4);
    assert_eq!(t.complete, 3);
    assert_eq!(t.end_reasons.freed, 3);
    assert_eq!(t.end_reasons.timeout, 1);
    assert_eq!(t.max_arm_delay_ns, 350);
    assert_eq!(t.mean_lifetime_ns, Some((1300 + 1300 + 700) / 3));
    assert_eq!(t.paths.len(), 2);
    let common = &t.paths[0];
    assert_eq!(common.histories, 2);
    assert_eq!(common.alloc_function, "st_alloc");
    assert_eq!(common.end, "st_free");
    assert!(!common.end_cpu_change);
    let steps: Vec<(&str, u64, u32, Option<AccessKind>, bool)> = common
        .elements
        .iter()
        .map(|e| {
            (
                e.function.as_str(),
                e.function_offset,
                e.range.offset,
                e.kind,
                e.cpu_change,
            )
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            ("st_alloc", 4, 0x10, Some(Write), false),
            ("st_producer", 4, 0x10, Some(Write), false),
            ("st_producer", 8, 0x18, Some(Read), false),
            ("st_consumer", 1, 0x10, Some(Read), true),
            ("st_consumer", 5, 0x18, Some(Read), false),
            ("st_free", 0, 0x10, Some(ReadWrite), false),
        ]
    );
    assert_eq!(common.elements[3].mean_since_alloc_ns, 1000);
    // The samples at the same type, instruction and offset: one each at the producer's store
    // and the consumer's load; none elsewhere.
    let sampled: Vec<u64> = common
        .elements
        .iter()
        .map(|e| e.sampled.as_ref().map_or(0, |s| s.samples))
        .collect();
    assert_eq!(sampled, vec![0, 1, 0, 1, 0, 0]);
    assert_eq!(
        common.elements[1].sampled.as_ref().and_then(|s| s.misses),
        None
    );
    let other = &t.paths[1];
    assert_eq!(other.histories, 1);
    assert!(other.elements.iter().all(|e| !e.cpu_change));
    assert!(other.elements.iter().any(|e| !e.instruction_found));
    // Convergence: paths at histories 1 and 3 (history 2 repeated history 1's).
    assert_eq!(t.convergence.histories, 3);
    assert_eq!(t.convergence.paths, 2);
    assert_eq!(t.convergence.new_path_at, vec![1, 3]);
    assert_eq!(t.convergence.last_new_path_at, 3);
    // Pairwise: +0x10 always first touched before +0x18.
    assert_eq!(t.field_orders.len(), 1);
    let order = &t.field_orders[0];
    assert_eq!((order.first.offset, order.second.offset), (0x10, 0x18));
    assert_eq!(order.histories, 3);
    assert_eq!(order.first_before_second, 3);
    assert_eq!(order.second_before_first, 0);
}

#[test]
fn data_flow_marks_the_cpu_change_between_producer_and_consumer() {
    let r = full_report();
    let flow = &r.find_type(ST_TYPE).expect("st_obj").data_flow;
    assert_eq!(flow.histories, 3);
    let order: Vec<&str> = flow.nodes.iter().map(|n| n.function.as_str()).collect();
    assert_eq!(
        order,
        vec![
            "st_alloc",
            "st_producer",
            "st_untraced",
            "st_consumer",
            "st_free"
        ]
    );
    assert_eq!(flow.nodes[0].role, FlowRole::Alloc);
    assert_eq!(flow.nodes[4].role, FlowRole::Free);
    let edge = |a, b| flow.edge(a, b).expect("edge").clone();
    let e = edge("st_alloc", "st_producer");
    assert_eq!((e.transitions, e.histories, e.cpu_changes), (3, 3, 0));
    let e = edge("st_producer", "st_consumer");
    assert_eq!((e.transitions, e.cpu_changes), (2, 2));
    let e = edge("st_producer", "st_untraced");
    assert_eq!((e.transitions, e.cpu_changes), (1, 0));
    let e = edge("st_untraced", "st_consumer");
    assert_eq!((e.transitions, e.cpu_changes), (1, 0));
    let e = edge("st_consumer", "st_free");
    assert_eq!((e.transitions, e.cpu_changes), (3, 0));
    assert_eq!(flow.edges.len(), 5);
    let producer = flow.node("st_producer").expect("node");
    // History 3's mismatched store is not an access to the watched bytes: left out.
    assert_eq!((producer.reads, producer.writes), (3, 2));
    assert_eq!(producer.sampled.as_ref().map(|s| s.samples), Some(1));
    let free = flow.node("st_free").expect("node");
    assert_eq!(free.read_writes, 3);
    assert_eq!(flow.node("st_untraced").expect("node").unknown_kind, 1);
}

#[test]
fn data_flow_dot_matches_its_golden_file() {
    let r = full_report();
    let dot =
        dprof_export::dot::data_flow_dot(&r.find_type(ST_TYPE).expect("st_obj").data_flow, None);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/data_flow.dot");
    if std::env::var_os("DPROF_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &dot).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path).expect("golden file (DPROF_BLESS=1 writes it)");
    assert_eq!(dot, expected);
    assert!(dot.starts_with("digraph data_flow {\n") && dot.ends_with("}\n"));
    assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    assert!(dot.contains("color=red"));
}

#[test]
fn a_profile_without_histories_has_no_section() {
    let profile = Profile::from_vec(dprof_fixtures::data_profile::profile()).expect("profile");
    let report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    assert!(report.histories.is_none());
    assert!(!has_histories(&profile).expect("records"));
    assert!(has_histories(&example_profile()).expect("records"));
    let json = serde_json::to_value(&report).expect("json");
    assert!(json.get("histories").is_none());
}

#[test]
fn sampled_misses_show_with_a_hardware_sampler() {
    let h = assembled();
    let kallsyms = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let mut sampled = pipeline::SampledAccesses::default();
    sampled.insert(
        ST_TYPE,
        ST_CONSUMER + 1,
        0x14,
        AccessStats {
            samples: 4,
            reads: 4,
            hw_samples: 4,
            misses: 3,
            latency_samples: 3,
            latency_sum: 600,
            ..AccessStats::default()
        },
    );
    // Outside the watched range: not joined.
    sampled.insert(
        ST_TYPE,
        ST_CONSUMER + 1,
        0x20,
        AccessStats {
            samples: 9,
            hw_samples: 9,
            misses: 9,
            ..AccessStats::default()
        },
    );
    let r = report(&h, &kallsyms, Some(&sampled));
    let t = r.find_type(ST_TYPE).expect("type");
    let m = t.paths[0].elements[3].sampled.clone().expect("matched");
    assert_eq!((m.samples, m.misses), (4, Some(3)));
    assert_eq!(m.mean_latency_cycles, Some(200.0));
    assert_eq!(m.miss_rate, Some(0.75));
    let consumer = t.data_flow.node("st_consumer").expect("node");
    assert_eq!(consumer.cost(), 3);
    assert!(dprof_export::dot::data_flow_dot(&t.data_flow, None).contains("3 misses"));
}

#[test]
fn mismatched_traps_stay_out_of_paths_with_cpu_changes_recomputed() {
    let h = assembled();
    let mut history = h.histories[0].clone();
    let before = history.hits.len();
    // A trap on CPU 1 between two CPU 0 hits, whose instruction touched other bytes.
    let mut stray = history.hits[1].clone();
    stray.cpu = 1;
    stray.cpu_change = true;
    stray.check = HitCheck::Mismatched;
    history.hits.insert(2, stray);
    history.hits[3].cpu_change = true; // back on CPU 0 after it
    let cleaned = history.without_mismatches();
    assert_eq!(cleaned.hits.len(), before);
    assert!(cleaned
        .hits
        .iter()
        .all(|hit| hit.check != HitCheck::Mismatched));
    assert_eq!(cleaned.cpu_changes(), h.histories[0].cpu_changes());
}

/// Histories name their type as the data profile does: a merged pool's by allocation site.
#[test]
fn histories_of_a_merged_pool_are_named_by_site() {
    let profile = example_profile();
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut collected = Collected::default();
    let mut records = profile.records();
    while let Some(pushed) = records.next_with(|header, record| collected.push(header, record)) {
        pushed.expect("valid records");
    }
    let merged = [dprof_format::MergedCache {
        pool: ":0000256".to_owned(),
        aliases: vec!["other_cache".to_owned(), ST_TYPE.to_owned()],
    }];
    let h = assemble_collected(collected, profile.text(), &kallsyms, &merged);
    assert!(!h.histories.is_empty());
    for history in &h.histories {
        assert_eq!(history.type_name, format!("{ST_TYPE}@st_alloc"));
    }
}

fn report_of(bytes: Vec<u8>) -> HistoryReport {
    let profile = Profile::from_vec(bytes).expect("valid profile");
    pipeline::analyze(&profile, &Options::default())
        .expect("analysis")
        .histories
        .expect("histories section")
}

/// The CPU changes of a type as the paths mark them: each path's marked steps, the free's
/// included, times its histories.
fn path_cpu_changes(t: &dprof_model::histories::TypeHistories) -> u64 {
    t.paths
        .iter()
        .map(|p| {
            let marked = p.elements.iter().filter(|e| e.cpu_change).count() as u64
                + u64::from(p.end_cpu_change);
            marked * p.histories
        })
        .sum()
}

/// One count of CPU changes: the total, the edges and the path traces agree, here and on an
/// object freed on another CPU than its last access (which the header once left out).
#[test]
fn cpu_changes_are_counted_once_for_the_total_the_edges_and_the_paths() {
    for (bytes, want) in [
        (example::profile(), 2),
        (example::freed_elsewhere_profile(), 1),
    ] {
        let r = report_of(bytes);
        let t = r.find_type(ST_TYPE).expect("st_obj");
        let flow = &t.data_flow;
        let on_edges: u64 = flow.edges.iter().map(|e| e.cpu_changes).sum();
        assert_eq!(flow.cpu_changes, want);
        assert_eq!(on_edges, want);
        assert_eq!(path_cpu_changes(t), want);
    }
    let r = report_of(example::freed_elsewhere_profile());
    let t = r.find_type(ST_TYPE).expect("st_obj");
    let e = t.data_flow.edge("st_producer", "st_free").expect("edge");
    assert_eq!((e.transitions, e.cpu_changes), (1, 1));
    assert!(t.paths.iter().any(|p| p.end_cpu_change));
}

/// A history's CPU changes include its free's; a history cut before its free and a
/// mismatched trap (no access to the watched bytes) count none in the data flow.
#[test]
fn the_free_counts_and_cut_histories_and_mismatches_do_not() {
    let profile = Profile::from_vec(example::freed_elsewhere_profile()).expect("profile");
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let h = assemble(&profile, &kallsyms).expect("records read");
    let freed_elsewhere = &h.histories[0];
    assert!(freed_elsewhere.hits.iter().all(|hit| !hit.cpu_change));
    assert!(freed_elsewhere.end_cpu_change());
    assert_eq!(freed_elsewhere.cpu_changes(), 1);

    let mut h = assembled();
    // History 4 timed out: a hit of it on CPU 1 is no step of the graph.
    let cut = &mut h.histories[3];
    assert!(!cut.is_complete());
    cut.hits[0].cpu = 1;
    cut.hits[0].cpu_change = true;
    // History 3, all on CPU 0, gets a mismatched trap on CPU 1.
    let mut stray = h.histories[2].hits[1].clone();
    stray.cpu = 1;
    stray.cpu_change = true;
    stray.check = HitCheck::Mismatched;
    h.histories[2].hits.insert(2, stray);
    h.histories[2].hits[3].cpu_change = true;
    let kallsyms = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let r = report(&h, &kallsyms, None);
    let t = r.find_type(ST_TYPE).expect("st_obj");
    assert_eq!(t.data_flow.cpu_changes, 2);
    assert_eq!(path_cpu_changes(t), 2);
}

/// `st_free` frees one object and hands two others on to `st_consumer`, which only reads
/// them (they are freed by `st_untraced`): `st_free` comes first, by its mean position along
/// the histories, rather than after every access as a node that only frees would.
#[test]
fn a_free_node_that_hands_objects_on_sits_among_the_accesses() {
    let profile = Profile::from_vec(example::freed_elsewhere_profile()).expect("profile");
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut h = assemble(&profile, &kallsyms).expect("records read");
    let mut handed_on = h.histories[1].clone();
    let end = handed_on.end.as_mut().expect("an end");
    end.free_site = ST_UNTRACED + 0x10;
    h.histories[1] = handed_on.clone();
    handed_on.id = 3;
    h.histories.push(handed_on);
    let r = report(&h, &kallsyms, None);
    let flow = &r.find_type(ST_TYPE).expect("st_obj").data_flow;
    let order: Vec<(&str, FlowRole)> = flow
        .nodes
        .iter()
        .map(|n| (n.function.as_str(), n.role))
        .collect();
    assert_eq!(
        order,
        vec![
            ("st_alloc", FlowRole::Alloc),
            ("st_producer", FlowRole::Access),
            ("st_free", FlowRole::Free),
            ("st_consumer", FlowRole::Access),
            ("st_untraced", FlowRole::Free),
        ]
    );
    assert_eq!(
        flow.edge("st_free", "st_consumer").map(|e| e.transitions),
        Some(2)
    );
}

/// A type whose only history timed out has histories and no graph, and says why.
#[test]
fn a_type_whose_histories_all_timed_out_says_why_it_has_no_data_flow() {
    let r = report_of(example::timed_out_profile());
    let t = r.find_type(ST_TYPE).expect("st_obj");
    assert_eq!((t.histories, t.complete), (1, 0));
    let flow = &t.data_flow;
    assert!(flow.nodes.is_empty());
    let empty = flow.why_empty.as_ref().expect("a reason");
    assert_eq!(empty.reason, EmptyFlowReason::NoCompleteHistory);
    assert_eq!(
        empty.message,
        "no history of st_obj ran from allocation to free (1 timed out): no data flow \
         (collect longer, or with a longer --history-timeout)"
    );
    let json = serde_json::to_value(flow).expect("json");
    assert_eq!(json["why_empty"]["reason"], "no_complete_history");
    // A graph with nodes has no reason, in the model or its JSON.
    let full = full_report();
    let flow = &full.find_type(ST_TYPE).expect("st_obj").data_flow;
    assert!(flow.why_empty.is_none());
    assert!(serde_json::to_value(flow)
        .expect("json")
        .get("why_empty")
        .is_none());
}

/// Each node lists the watched ranges its hits touched, by kind, adding up to its counts.
#[test]
fn flow_nodes_list_the_ranges_they_touched() {
    let r = full_report();
    let flow = &r.find_type(ST_TYPE).expect("st_obj").data_flow;
    let producer = flow.node("st_producer").expect("node");
    let ranges: Vec<(u32, u64, u64)> = producer
        .ranges
        .iter()
        .map(|r| (r.range.offset, r.reads, r.writes))
        .collect();
    assert_eq!(ranges, vec![(0x10, 0, 2), (0x18, 3, 0)]);
    assert_eq!(producer.ranges[0].kinds(), "W 2");
    for node in &flow.nodes {
        let hits: u64 = node
            .ranges
            .iter()
            .map(|r| r.reads + r.writes + r.read_writes + r.unknown_kind)
            .sum();
        assert_eq!(hits, node.hits(), "{}", node.function);
    }
}

/// With the struct's BTF, paths, field orders and the graph's ranges name their fields.
#[test]
fn history_fields_are_named_like_the_data_profile_s() {
    let profile = Profile::from_vec(example::profile_with_btf()).expect("profile");
    let mut report = pipeline::analyze(&profile, &Options::default()).expect("analysis");
    let btf = crate::btf::Btf::parse(profile.btf().expect("a Btf section")).expect("BTF");
    crate::report::annotate_fields(
        &mut report,
        &crate::report::StructNames::builtin(),
        Some(&btf),
    );
    let h = report.histories.as_ref().expect("histories");
    let t = h.find_type(ST_TYPE).expect("st_obj");
    let named: Vec<(u32, Option<&str>)> = t.paths[0]
        .elements
        .iter()
        .map(|e| (e.range.offset, e.field.as_deref()))
        .collect();
    assert_eq!(
        named[..3],
        [
            (0x10, Some("payload")),
            (0x10, Some("payload")),
            (0x18, Some("len"))
        ]
    );
    let order = &t.field_orders[0];
    assert_eq!(
        (order.first_field.as_deref(), order.second_field.as_deref()),
        (Some("payload"), Some("len"))
    );
    let producer = t.data_flow.node("st_producer").expect("node");
    let labels: Vec<String> = producer.ranges.iter().map(FlowRange::label).collect();
    assert_eq!(labels, ["+0x10/8 payload", "+0x18/4 len"]);
    // Without debug info the offsets stand alone.
    let plain = full_report();
    let t = plain.find_type(ST_TYPE).expect("st_obj");
    assert!(t.paths[0].elements.iter().all(|e| e.field.is_none()));
}

/// The DOT export says why a type has no graph, as a note, never as an empty graph.
#[test]
fn the_dot_of_a_type_without_data_flow_is_a_note() {
    let r = report_of(example::timed_out_profile());
    let dot =
        dprof_export::dot::data_flow_dot(&r.find_type(ST_TYPE).expect("st_obj").data_flow, None);
    assert!(dot.contains("label=\"st_obj: no data flow\""), "{dot}");
    assert!(dot.contains("shape=note"), "{dot}");
    assert!(dot.contains("(1 timed out)"), "{dot}");
    assert!(!dot.contains("0 histories"), "{dot}");
}

/// The bounce flag takes the histories into account: a type whose samples never saw an object
/// on two CPUs bounces when one of its histories changed CPU, and says how many did.
#[test]
fn histories_with_a_cpu_change_make_their_type_bounce() {
    let h = assembled();
    let moved = h
        .histories
        .iter()
        .filter(|x| x.type_name == ST_TYPE && x.cpu_changes() > 0)
        .count() as u64;
    assert!(moved > 0, "the example has a history that changes CPU");
    let report = pipeline::analyze(&example_profile(), &Options::default()).expect("analysis");
    let ty = report
        .data_profile
        .types
        .iter()
        .find(|t| t.name == ST_TYPE)
        .expect("the example's type is profiled");
    assert_eq!(ty.bounced_histories, Some(moved));
    assert!(ty.bounce && ty.bounced_objects >= moved);
    // Without histories, only the samples decide.
    let mut profile = report.data_profile.clone();
    for t in &mut profile.types {
        t.bounced_objects = 0;
        t.bounce = false;
        t.bounced_histories = None;
    }
    apply_bounces(&mut profile, &Histories::default());
    assert!(profile.types.iter().all(|t| !t.bounce));
    apply_bounces(&mut profile, &h);
    let ty = profile
        .types
        .iter()
        .find(|t| t.name == ST_TYPE)
        .expect("type");
    assert_eq!((ty.bounce, ty.bounced_objects), (true, moved));
}
