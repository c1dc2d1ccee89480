//! The data flow view as a Graphviz DOT graph (`dprof report --view data-flow --format dot`).

use std::collections::HashMap;
use std::fmt::Write as _;

use dprof_model::histories::{
    DataFlow, EmptyFlow, FlowNode, FlowRole, FullCoverage, MergedPath, SampleMatch,
};
use dprof_model::AccessKind;

/// Merged paths [`data_flow_dot`] draws at most, the most frequent: more would crowd out the
/// function graph, and `--json` lists them all.
pub const MERGED_PATHS_DRAWN: usize = 5;

/// `flow` in Graphviz DOT: alloc at the top, free at the bottom, edges labelled with
/// their transitions, CPU changes drawn thick and red, nodes shaded by sampled cost and
/// listing the watched ranges they touched (with their field names). A graph with no node
/// ([`DataFlow::why_empty`]) is a note saying why, so that what `dot` draws says it.
///
/// For a type watched over its whole object (`full`), each of its most frequent merged paths
/// ([`MERGED_PATHS_DRAWN`]) is drawn beside, in a box of its own: one node per access in
/// merged order, CPU changes drawn as the graph's are.
#[must_use]
pub fn data_flow_dot(flow: &DataFlow, full: Option<&FullCoverage>) -> String {
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
    if let Some(full) = full {
        merged_paths(full, &mut out);
    }
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
    let cost = cost_line(n.sampled.as_ref());
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

/// A node's sampled cost as a line of its label (`\n3 misses`, `\n2 samples`), empty
/// without samples.
fn cost_line(sampled: Option<&SampleMatch>) -> String {
    sampled
        .map(|s| match s.misses {
            Some(m) => format!("\\n{m} misses"),
            None => format!("\\n{} samples", s.samples),
        })
        .unwrap_or_default()
}

/// The most frequent merged paths, one cluster each (`cluster_merged1`, ...), and a note
/// counting those left out.
fn merged_paths(full: &FullCoverage, out: &mut String) {
    let drawn = &full.paths[..full.paths.len().min(MERGED_PATHS_DRAWN)];
    let max_cost = drawn
        .iter()
        .flat_map(|p| &p.steps)
        .map(|s| s.sampled.as_ref().map_or(0, SampleMatch::cost))
        .max()
        .unwrap_or(0);
    for (i, path) in drawn.iter().enumerate() {
        merged_path(i + 1, path, max_cost, out);
    }
    let left_out = full.paths.len() - drawn.len();
    if left_out > 0 {
        let _ = writeln!(
            out,
            "  merged_more [shape=note, style=\"\", label=\"{left_out} more merged paths not \
             drawn (the {MERGED_PATHS_DRAWN} most frequent are); --json lists them all\"];"
        );
    }
}

/// Merged path `n`: the allocation, each access (its instruction, chunk and field, read or
/// write, CPU label and sampled cost) and the free, in merged order; a step to another CPU
/// label is thick and red, as the function graph's CPU changes are.
fn merged_path(n: usize, path: &MergedPath, max_cost: u64, out: &mut String) {
    let _ = writeln!(out, "  subgraph cluster_merged{n} {{");
    let _ = writeln!(
        out,
        "    label=\"merged path {n}: {} sets ({:.1}%)\";",
        path.sets,
        path.share * 100.0
    );
    let _ = writeln!(out, "    style=dashed;");
    let _ = writeln!(
        out,
        "    m{n}_alloc [label=\"{}\\nalloc, cpu 0\", fillcolor=\"#ffffff\"];",
        escape(&path.alloc_function)
    );
    let mut prev = format!("m{n}_alloc");
    let mut prev_cpu = 0;
    for (i, s) in path.steps.iter().enumerate() {
        let id = format!("m{n}_{i}");
        let location = if s.instruction_found {
            format!("{}+{:#x}", s.function, s.function_offset)
        } else {
            format!("{}+{:#x} (no code)", s.function, s.function_offset)
        };
        let cost = s.sampled.as_ref().map_or(0, SampleMatch::cost);
        let _ = writeln!(
            out,
            "    {id} [label=\"{}\\n{}\\n{} cpu {}{}\", fillcolor=\"{}\"];",
            escape(&location),
            escape(&s.chunk.with_field(s.field.as_deref())),
            kind_letters(s.kind),
            s.cpu,
            cost_line(s.sampled.as_ref()),
            shade(cost, max_cost)
        );
        merged_edge(out, &prev, &id, s.cpu_change.then_some((prev_cpu, s.cpu)));
        prev = id;
        prev_cpu = s.cpu;
    }
    let _ = writeln!(
        out,
        "    m{n}_free [label=\"{}\\nfree, cpu {}\", fillcolor=\"#ffffff\"];",
        escape(&path.end),
        path.end_cpu
    );
    let free = format!("m{n}_free");
    let change = path.end_cpu_change.then_some((prev_cpu, path.end_cpu));
    merged_edge(out, &prev, &free, change);
    let _ = writeln!(out, "  }}");
}

/// A step of a merged path; `cpu_change`: from which CPU label to which, drawn as the
/// function graph draws CPU changes.
fn merged_edge(out: &mut String, from: &str, to: &str, cpu_change: Option<(u32, u32)>) {
    match cpu_change {
        Some((a, b)) => {
            let _ = writeln!(
                out,
                "    {from} -> {to} [label=\"cpu {a} to {b}\", color=red, penwidth=3];"
            );
        }
        None => {
            let _ = writeln!(out, "    {from} -> {to};");
        }
    }
}

/// An access as the graph's nodes count them: `R`, `W`, `RW`, `?` when unknown.
fn kind_letters(kind: Option<AccessKind>) -> &'static str {
    match kind {
        Some(AccessKind::Read) => "R",
        Some(AccessKind::Write) => "W",
        Some(AccessKind::ReadWrite) => "RW",
        None => "?",
    }
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
