//! Where the DOT graph pins its nodes, what it says of an empty graph, its ranges, and the
//! merged paths of a type watched over its whole object.

use dprof_model::histories::{
    DataFlow, EmptyFlow, EmptyFlowReason, FlowEdge, FlowNode, FlowRange, FlowRole, FullCoverage,
    MergedPath, MergedStep, SampleMatch, SetCost, Span,
};
use dprof_model::AccessKind::{Read, Write};

use super::{data_flow_dot, MERGED_PATHS_DRAWN};

fn node(function: &str, role: FlowRole) -> FlowNode {
    FlowNode {
        function: function.to_owned(),
        role,
        histories: 1,
        reads: 1,
        writes: 0,
        read_writes: 0,
        unknown_kind: 0,
        ranges: Vec::new(),
        sampled: None,
    }
}

fn edge(from: &str, to: &str) -> FlowEdge {
    FlowEdge {
        from: from.to_owned(),
        to: to.to_owned(),
        transitions: 1,
        histories: 1,
        cpu_changes: 0,
    }
}

fn flow(nodes: Vec<FlowNode>, edges: Vec<FlowEdge>) -> DataFlow {
    DataFlow {
        type_name: "t".to_owned(),
        histories: 2,
        cpu_changes: 0,
        why_empty: None,
        nodes,
        edges,
    }
}

/// The line of `dot` that pins nodes with `rank`, if any.
fn rank_line<'d>(dot: &'d str, rank: &str) -> Option<&'d str> {
    dot.lines().find(|l| l.contains(&format!("rank={rank};")))
}

/// `hand_on` frees some objects and hands others on to `free`: only `free`, which no step
/// leaves, is pinned to the bottom; a self-loop does not count as leaving.
#[test]
fn only_free_nodes_no_step_leaves_are_pinned_to_the_bottom() {
    let dot = data_flow_dot(
        &flow(
            vec![
                node("alloc", FlowRole::Alloc),
                node("hand_on", FlowRole::Free),
                node("free", FlowRole::Free),
            ],
            vec![
                edge("alloc", "hand_on"),
                edge("hand_on", "free"),
                edge("free", "free"),
            ],
        ),
        None,
    );
    assert_eq!(
        rank_line(&dot, "sink"),
        Some("  { rank=sink; n2; }"),
        "{dot}"
    );
    assert_eq!(
        rank_line(&dot, "source"),
        Some("  { rank=source; n0; }"),
        "{dot}"
    );
}

/// A function that allocates some objects and frees others has steps into it: pinned to the
/// top, they would point upwards.
#[test]
fn alloc_nodes_with_steps_into_them_are_not_pinned_to_the_top() {
    let dot = data_flow_dot(
        &flow(
            vec![
                node("alloc", FlowRole::Alloc),
                node("both", FlowRole::AllocAndFree),
                node("use", FlowRole::Access),
            ],
            vec![edge("alloc", "use"), edge("use", "both")],
        ),
        None,
    );
    assert_eq!(
        rank_line(&dot, "source"),
        Some("  { rank=source; n0; }"),
        "{dot}"
    );
    assert_eq!(rank_line(&dot, "sink"), None, "{dot}");
}

/// No node: a note with the reason, under a title that says there is no data flow.
#[test]
fn an_empty_graph_is_a_note_saying_why() {
    let mut empty = flow(Vec::new(), Vec::new());
    empty.histories = 0;
    empty.why_empty = Some(EmptyFlow {
        reason: EmptyFlowReason::NoCompleteHistory,
        message: "no history of t ran from allocation to free (1 timed out): no \"data\" flow"
            .to_owned(),
    });
    assert_eq!(
        data_flow_dot(&empty, None),
        "digraph data_flow {\n  label=\"t: no data flow\";\n  labelloc=t;\n  why [shape=note, \
         fontname=\"monospace\", label=\"no history of t ran from allocation to free (1 timed \
         out): no \\\"data\\\" flow\"];\n}\n"
    );
}

/// Each range a node touched, with its field when named, on a line of its own; the title
/// counts the CPU changes.
#[test]
fn nodes_list_their_ranges_with_field_names() {
    let mut n = node("f", FlowRole::Access);
    n.ranges = vec![
        FlowRange {
            range: Span {
                offset: 0x10,
                len: 8,
            },
            field: Some("payload".to_owned()),
            reads: 1,
            writes: 2,
            read_writes: 0,
            unknown_kind: 0,
        },
        FlowRange {
            range: Span {
                offset: 0x40,
                len: 4,
            },
            field: None,
            reads: 0,
            writes: 0,
            read_writes: 0,
            unknown_kind: 1,
        },
    ];
    let mut f = flow(vec![node("a", FlowRole::Alloc), n], vec![edge("a", "f")]);
    f.cpu_changes = 3;
    let dot = data_flow_dot(&f, None);
    assert!(
        dot.contains("label=\"f\\nR 1 W 0 RW 0\\n+0x10/8 payload (R 1 W 2)\\l+0x40/4 (? 1)\\l\""),
        "{dot}"
    );
    assert!(
        dot.contains("label=\"t: 2 histories, 3 CPU changes\";"),
        "{dot}"
    );
}

/// A merged step of `function` at offset 0, on chunk `offset` (named `field`), with CPU
/// label `cpu`.
fn merged_step(function: &str, offset: u32, field: &str, write: bool, cpu: u32) -> MergedStep {
    MergedStep {
        function: function.to_owned(),
        function_offset: 0,
        ip: 0xffff_ffff_8100_0000,
        instruction_found: true,
        chunk: Span { offset, len: 8 },
        field: Some(field.to_owned()),
        kind: Some(if write { Write } else { Read }),
        cpu,
        cpu_change: false,
        mean_since_alloc_ns: 100,
        sampled: None,
    }
}

/// A merged path taken by `sets` sets, freed on CPU label 1 after `steps`.
fn merged_path(sets: u64, steps: Vec<MergedStep>) -> MergedPath {
    MergedPath {
        sets,
        share: sets as f64 / 10.0,
        alloc_function: "alloc".to_owned(),
        end: "free".to_owned(),
        end_cpu: 1,
        end_cpu_change: false,
        steps,
    }
}

fn full(paths: Vec<MergedPath>) -> FullCoverage {
    FullCoverage {
        object_size: 16,
        chunks: vec![Span { offset: 0, len: 8 }, Span { offset: 8, len: 8 }],
        targets: 1,
        sets: paths.iter().map(|p| p.sets).sum(),
        rounds: 1,
        incomplete_rounds: 0,
        unmatched_histories: 0,
        unmerged_histories: 0,
        cycles_broken: 0,
        distinct_paths_after: Vec::new(),
        last_new_path_at: 0,
        cost: Vec::new(),
        total_cost: SetCost::default(),
        paths,
    }
}

/// The lines of `dot` inside `subgraph NAME { ... }`, trimmed.
fn cluster<'d>(dot: &'d str, name: &str) -> Vec<&'d str> {
    dot.lines()
        .skip_while(|l| l.trim() != format!("subgraph {name} {{"))
        .skip(1)
        .take_while(|l| l.trim() != "}")
        .map(str::trim)
        .collect()
}

/// A type watched whole: its merged path is a cluster of its own beside the function graph,
/// one node per access in merged order, the step to another CPU label thick and red, the
/// step's samples shading it; names are escaped.
#[test]
fn merged_paths_are_drawn_in_merged_order_with_their_cpu_changes() {
    let mut write = merged_step("fill\"er", 0, "head", true, 0);
    write.sampled = Some(SampleMatch {
        samples: 2,
        hw_samples: 0,
        misses: None,
        miss_rate: None,
        mean_latency_cycles: None,
        sources: Vec::new(),
    });
    let mut read = merged_step("use", 8, "len", false, 1);
    read.cpu_change = true;
    let whole = full(vec![merged_path(10, vec![write, read])]);
    let graph = flow(vec![node("alloc", FlowRole::Alloc)], Vec::new());
    let dot = data_flow_dot(&graph, Some(&whole));
    assert_eq!(
        cluster(&dot, "cluster_merged1"),
        vec![
            "label=\"merged path 1: 10 sets (100.0%)\";",
            "style=dashed;",
            "m1_alloc [label=\"alloc\\nalloc, cpu 0\", fillcolor=\"#ffffff\"];",
            "m1_0 [label=\"fill\\\"er+0x0\\n+0x0/8 head\\nW cpu 0\\n2 samples\", fillcolor=\"#878787\"];",
            "m1_alloc -> m1_0;",
            "m1_1 [label=\"use+0x0\\n+0x8/8 len\\nR cpu 1\", fillcolor=\"#ffffff\"];",
            "m1_0 -> m1_1 [label=\"cpu 0 to 1\", color=red, penwidth=3];",
            "m1_free [label=\"free\\nfree, cpu 1\", fillcolor=\"#ffffff\"];",
            "m1_1 -> m1_free;",
        ],
        "{dot}"
    );
    // The function graph is still there, and the graph closes once.
    assert!(
        dot.contains("  n0 [label=\"alloc\\nalloc\\nR 1 W 0 RW 0\""),
        "{dot}"
    );
    assert!(dot.ends_with("  }\n}\n"), "{dot}");
    assert_eq!(dot.matches('{').count(), dot.matches('}').count(), "{dot}");
    // Without a whole-object view, no cluster.
    assert!(!data_flow_dot(&graph, None).contains("subgraph"));
}

/// Past [`MERGED_PATHS_DRAWN`], the most frequent are drawn and a note counts the others.
#[test]
fn merged_paths_past_the_cap_are_counted_in_a_note() {
    let paths: Vec<MergedPath> = (0..MERGED_PATHS_DRAWN as u64 + 2)
        .map(|i| merged_path(10 - i, vec![merged_step("use", 0, "head", false, 0)]))
        .collect();
    let dot = data_flow_dot(&flow(Vec::new(), Vec::new()), Some(&full(paths)));
    assert_eq!(
        dot.matches("subgraph cluster_merged").count(),
        MERGED_PATHS_DRAWN
    );
    assert!(dot.contains("cluster_merged5 {"), "{dot}");
    assert!(!dot.contains("cluster_merged6"), "{dot}");
    assert!(
        dot.contains(
            "merged_more [shape=note, style=\"\", label=\"2 more merged paths not drawn (the 5 \
             most frequent are); --json lists them all\"];"
        ),
        "{dot}"
    );
}
