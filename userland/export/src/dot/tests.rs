//! Where the DOT graph pins its nodes, what it says of an empty graph, and its ranges.

use dprof_model::histories::{
    DataFlow, EmptyFlow, EmptyFlowReason, FlowEdge, FlowNode, FlowRange, FlowRole, Span,
};

use super::data_flow_dot;

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
    let dot = data_flow_dot(&flow(
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
    ));
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
    let dot = data_flow_dot(&flow(
        vec![
            node("alloc", FlowRole::Alloc),
            node("both", FlowRole::AllocAndFree),
            node("use", FlowRole::Access),
        ],
        vec![edge("alloc", "use"), edge("use", "both")],
    ));
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
        data_flow_dot(&empty),
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
    let dot = data_flow_dot(&f);
    assert!(
        dot.contains("label=\"f\\nR 1 W 0 RW 0\\n+0x10/8 payload (R 1 W 2)\\l+0x40/4 (? 1)\\l\""),
        "{dot}"
    );
    assert!(
        dot.contains("label=\"t: 2 histories, 3 CPU changes\";"),
        "{dot}"
    );
}
