//! The data flow view as a Graphviz DOT graph (`dprof report --view data-flow --format dot`).

use std::collections::HashMap;
use std::fmt::Write as _;

use dprof_model::histories::{DataFlow, EmptyFlow, FlowNode, FlowRole};

/// `flow` in Graphviz DOT: alloc at the top, free at the bottom, edges labelled with
/// their transitions, CPU changes drawn thick and red, nodes shaded by sampled cost and
/// listing the watched ranges they touched (with their field names). A graph with no node
/// ([`DataFlow::why_empty`]) is a note saying why, so that what `dot` draws says it.
#[must_use]
pub fn data_flow_dot(flow: &DataFlow) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "digraph data_flow {{");
    if let Some(empty) = flow.why_empty.as_ref().filter(|_| flow.nodes.is_empty()) {
        empty_note(&mut out, &flow.type_name, empty);
        let _ = writeln!(out, "}}");
        return out;
    }
    let max_cost = flow.nodes.iter().map(FlowNode::cost).max().unwrap_or(0);
    let index: HashMap<&str, usize> = flow
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.function.as_str(), i))
        .collect();
    let _ = writeln!(
        out,
        "  label=\"{}: {} histories, {} CPU changes\";",
        escape(&flow.type_name),
        flow.histories,
        flow.cpu_changes
    );
    let _ = writeln!(out, "  labelloc=t;");
    let _ = writeln!(out, "  rankdir=TB;");
    let _ = writeln!(
        out,
        "  node [shape=box, style=filled, fontname=\"monospace\"];"
    );
    for (i, n) in flow.nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "  n{i} [label=\"{}\", fillcolor=\"{}\"];",
            node_label(n),
            shade(n.cost(), max_cost)
        );
    }
    for e in &flow.edges {
        let (Some(a), Some(b)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) else {
            continue;
        };
        if e.cpu_changes > 0 {
            let _ = writeln!(
                out,
                "  n{a} -> n{b} [label=\"{} ({} CPU changes)\", color=red, penwidth=3];",
                e.transitions, e.cpu_changes
            );
        } else {
            let _ = writeln!(out, "  n{a} -> n{b} [label=\"{}\"];", e.transitions);
        }
    }
    pin_ends(flow, &mut out);
    let _ = writeln!(out, "}}");
    out
}

/// A node's label: its function, role, hits by kind, sampled cost, then one left-justified
/// line (`\l`) per range it touched.
fn node_label(n: &FlowNode) -> String {
    let role = match n.role {
        FlowRole::Alloc => "alloc\\n",
        FlowRole::Free => "free\\n",
        FlowRole::AllocAndFree => "alloc, free\\n",
        FlowRole::Access => "",
    };
    let cost = n
        .sampled
        .as_ref()
        .map(|s| match s.misses {
            Some(m) => format!("\\n{m} misses"),
            None => format!("\\n{} samples", s.samples),
        })
        .unwrap_or_default();
    let unknown = if n.unknown_kind > 0 {
        format!(" ? {}", n.unknown_kind)
    } else {
        String::new()
    };
    let mut label = format!(
        "{}\\n{role}R {} W {} RW {}{unknown}{cost}",
        escape(&n.function),
        n.reads,
        n.writes,
        n.read_writes
    );
    if !n.ranges.is_empty() {
        label.push_str("\\n");
    }
    for r in &n.ranges {
        label.push_str(&escape(&r.summary()));
        label.push_str("\\l");
    }
    label
}

/// Pins alloc nodes to the top and free nodes to the bottom, but only those no edge comes
/// into (from another node) or leaves: a pinned node with one would draw that edge upwards,
/// against the flow.
fn pin_ends(flow: &DataFlow, out: &mut String) {
    let enters = |f: &str| flow.edges.iter().any(|e| e.to == f && e.from != f);
    let leaves = |f: &str| flow.edges.iter().any(|e| e.from == f && e.to != f);
    let pinned = |keep: &dyn Fn(&FlowNode) -> bool| -> Vec<String> {
        flow.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| keep(n))
            .map(|(i, _)| format!("n{i}"))
            .collect()
    };
    let sources = pinned(&|n| {
        matches!(n.role, FlowRole::Alloc | FlowRole::AllocAndFree) && !enters(&n.function)
    });
    if !sources.is_empty() {
        let _ = writeln!(out, "  {{ rank=source; {}; }}", sources.join("; "));
    }
    let sinks = pinned(&|n| n.role == FlowRole::Free && !leaves(&n.function));
    if !sinks.is_empty() {
        let _ = writeln!(out, "  {{ rank=sink; {}; }}", sinks.join("; "));
    }
}

/// The graph of a type with no data flow: its name and why, as a note.
fn empty_note(out: &mut String, type_name: &str, empty: &EmptyFlow) {
    let _ = writeln!(out, "  label=\"{}: no data flow\";", escape(type_name));
    let _ = writeln!(out, "  labelloc=t;");
    let _ = writeln!(
        out,
        "  why [shape=note, fontname=\"monospace\", label=\"{}\"];",
        escape(&empty.message)
    );
}

/// A DOT string body: quotes and backslashes escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// White for no cost, darker grey for more (never so dark that black text is unreadable).
fn shade(cost: u64, max: u64) -> String {
    let level = (cost * 120)
        .checked_div(max)
        .map_or(255, |dark| 255 - dark as u8);
    format!("#{level:02x}{level:02x}{level:02x}")
}

#[cfg(test)]
mod tests;
