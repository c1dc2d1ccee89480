//! The data flow view (paper section 3.4): per type, the functions that touch an object from
//! alloc to free, merged over its complete histories. Nodes are functions (with their reads,
//! writes and sampled cost), edges join consecutive functions of a history, weighted by how
//! often that step happened, and count the steps where the object moved to another CPU.

use std::fmt::Write as _;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::paths::{element_samples, end_label, SampleMatch};
use super::{function_of, History, Span};
use crate::analysis::{AccessStats, SampledAccesses};
use crate::decode::AccessKind;
use crate::resolve::SymbolSource;

/// What a function is to the type's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowRole {
    /// Allocates them.
    Alloc,
    /// Touches them.
    Access,
    /// Frees them (or stands for an untraced free: `(reallocated)`).
    Free,
    /// Both allocates and frees them.
    AllocAndFree,
}

/// One function of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowNode {
    /// Function name.
    pub function: String,
    /// Its role.
    pub role: FlowRole,
    /// Histories that went through it.
    pub histories: u64,
    /// Read-only hits in it.
    pub reads: u64,
    /// Write-only hits.
    pub writes: u64,
    /// Read-modify-write hits.
    pub read_writes: u64,
    /// Hits whose kind is unknown (instruction not found, implicit operands).
    pub unknown_kind: u64,
    /// Samples of the type at the instructions and ranges its hits name; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampleMatch>,
}

impl FlowNode {
    /// Hits in the function.
    #[must_use]
    pub const fn hits(&self) -> u64 {
        self.reads + self.writes + self.read_writes + self.unknown_kind
    }

    /// What shades the node: sampled misses with a hardware sampler, else samples.
    #[must_use]
    pub fn cost(&self) -> u64 {
        self.sampled
            .as_ref()
            .map_or(0, |s| s.misses.unwrap_or(s.samples))
    }
}

/// A step from one function to the next within a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEdge {
    /// From this function.
    pub from: String,
    /// To this one.
    pub to: String,
    /// Times the step was taken, all histories together.
    pub transitions: u64,
    /// Histories that took it.
    pub histories: u64,
    /// Of the transitions, those where the next function ran on another CPU.
    pub cpu_changes: u64,
}

/// The data flow graph of one type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataFlow {
    /// The type.
    pub type_name: String,
    /// Complete histories merged.
    pub histories: u64,
    /// Nodes, alloc first, free last, the others by their mean position along the histories.
    pub nodes: Vec<FlowNode>,
    /// Edges, in node order of `from`, then most taken first.
    pub edges: Vec<FlowEdge>,
}

#[derive(Default)]
struct NodeAcc {
    alloc: bool,
    free: bool,
    histories: u64,
    kinds: [u64; 4],
    position_sum: f64,
    positions: u64,
    /// Distinct (ip, range) accesses, for the sampled cost.
    accesses: FxHashSet<(u64, Span)>,
}

#[derive(Default)]
struct EdgeAcc {
    transitions: u64,
    histories: u64,
    cpu_changes: u64,
}

/// One history as a sequence of function visits: `(function, cpu)`, consecutive accesses in
/// one function on one CPU merged.
struct Visit {
    function: String,
    cpu: u32,
}

/// Builds the graph of `complete` histories of `type_name`.
#[allow(
    clippy::too_many_lines,
    reason = "one pass from histories to the graph, then its ordering"
)]
pub(super) fn data_flow(
    type_name: &str,
    complete: &[&History],
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> DataFlow {
    let mut nodes: FxHashMap<String, NodeAcc> = FxHashMap::default();
    let mut edges: FxHashMap<(String, String), EdgeAcc> = FxHashMap::default();
    for history in complete {
        let alloc = function_of(symbols, history.alloc_site).0;
        nodes.entry(alloc.clone()).or_default().alloc = true;
        let mut visits = vec![Visit {
            function: alloc,
            cpu: history.start_cpu,
        }];
        let mut steps: Vec<(usize, bool)> = Vec::new();
        let mut visit = |function: String, cpu: u32, visits: &mut Vec<Visit>| {
            let last = visits.len() - 1;
            if visits[last].function == function && visits[last].cpu == cpu {
                return;
            }
            steps.push((last, visits[last].cpu != cpu));
            visits.push(Visit { function, cpu });
        };
        for hit in &history.hits {
            let function = function_of(symbols, hit.ip()).0;
            let node = nodes.entry(function.clone()).or_default();
            let k = match hit.kind {
                Some(AccessKind::Read) => 0,
                Some(AccessKind::Write) => 1,
                Some(AccessKind::ReadWrite) => 2,
                None => 3,
            };
            node.kinds[k] += 1;
            if hit.insn_ip.is_some() {
                node.accesses.insert((hit.ip(), hit.range));
            }
            visit(function, hit.cpu, &mut visits);
        }
        let (end, _) = end_label(symbols, history);
        nodes.entry(end.clone()).or_default().free = true;
        let end_cpu = history.end.map_or(history.start_cpu, |e| e.cpu);
        visit(end, end_cpu, &mut visits);

        let mut seen_nodes: FxHashSet<&str> = FxHashSet::default();
        let span = (visits.len().max(2) - 1) as f64;
        for (i, v) in visits.iter().enumerate() {
            if let Some(node) = nodes.get_mut(&v.function) {
                node.position_sum += i as f64 / span;
                node.positions += 1;
                if seen_nodes.insert(&v.function) {
                    node.histories += 1;
                }
            }
        }
        let mut seen_edges: FxHashSet<(&str, &str)> = FxHashSet::default();
        for &(from, cpu_change) in &steps {
            let (Some(a), Some(b)) = (visits.get(from), visits.get(from + 1)) else {
                continue;
            };
            let edge = edges
                .entry((a.function.clone(), b.function.clone()))
                .or_default();
            edge.transitions += 1;
            edge.cpu_changes += u64::from(cpu_change);
            if seen_edges.insert((&a.function, &b.function)) {
                edge.histories += 1;
            }
        }
    }

    let mut list: Vec<FlowNode> = Vec::with_capacity(nodes.len());
    let mut order: FxHashMap<String, (u8, f64)> = FxHashMap::default();
    for (function, acc) in nodes {
        let role = match (acc.alloc, acc.free) {
            (true, true) => FlowRole::AllocAndFree,
            (true, false) => FlowRole::Alloc,
            (false, true) => FlowRole::Free,
            (false, false) => FlowRole::Access,
        };
        let rank = match role {
            FlowRole::Alloc | FlowRole::AllocAndFree => 0,
            FlowRole::Access => 1,
            FlowRole::Free => 2,
        };
        let mean = if acc.positions == 0 {
            0.0
        } else {
            acc.position_sum / acc.positions as f64
        };
        order.insert(function.clone(), (rank, mean));
        let sampled = sampled.and_then(|s| {
            let mut stats = AccessStats::default();
            for &(ip, range) in &acc.accesses {
                let one = element_samples(s, type_name, ip, range);
                stats.samples += one.samples;
                stats.hw_samples += one.hw_samples;
                stats.misses += one.misses;
                stats.latency_samples += one.latency_samples;
                stats.latency_sum += one.latency_sum;
            }
            SampleMatch::of(&stats, s.hardware())
        });
        list.push(FlowNode {
            function,
            role,
            histories: acc.histories,
            reads: acc.kinds[0],
            writes: acc.kinds[1],
            read_writes: acc.kinds[2],
            unknown_kind: acc.kinds[3],
            sampled,
        });
    }
    let key = |f: &str| order.get(f).copied().unwrap_or((1, 0.5));
    list.sort_by(|a, b| {
        let (ka, kb) = (key(&a.function), key(&b.function));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then_with(|| a.function.cmp(&b.function))
    });
    let position: FxHashMap<&str, usize> = list
        .iter()
        .enumerate()
        .map(|(i, n)| (n.function.as_str(), i))
        .collect();
    let mut edge_list: Vec<FlowEdge> = edges
        .into_iter()
        .map(|((from, to), e)| FlowEdge {
            from,
            to,
            transitions: e.transitions,
            histories: e.histories,
            cpu_changes: e.cpu_changes,
        })
        .collect();
    let at = |f: &str| position.get(f).copied().unwrap_or(usize::MAX);
    edge_list.sort_by(|a, b| {
        at(&a.from)
            .cmp(&at(&b.from))
            .then(b.transitions.cmp(&a.transitions))
            .then(at(&a.to).cmp(&at(&b.to)))
    });
    DataFlow {
        type_name: type_name.to_owned(),
        histories: complete.len() as u64,
        nodes: list,
        edges: edge_list,
    }
}

impl DataFlow {
    /// The node of `function`.
    #[must_use]
    pub fn node(&self, function: &str) -> Option<&FlowNode> {
        self.nodes.iter().find(|n| n.function == function)
    }

    /// The edge from `from` to `to`.
    #[must_use]
    pub fn edge(&self, from: &str, to: &str) -> Option<&FlowEdge> {
        self.edges.iter().find(|e| e.from == from && e.to == to)
    }

    /// The graph in Graphviz DOT: alloc at the top, free at the bottom, edges labelled with
    /// their transitions, CPU changes drawn thick and red, nodes shaded by sampled cost.
    #[must_use]
    pub fn to_dot(&self) -> String {
        let mut out = String::new();
        let max_cost = self.nodes.iter().map(FlowNode::cost).max().unwrap_or(0);
        let index: FxHashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.function.as_str(), i))
            .collect();
        // Writing to a String cannot fail.
        let _ = writeln!(out, "digraph data_flow {{");
        let _ = writeln!(
            out,
            "  label=\"{}: {} histories\";",
            escape(&self.type_name),
            self.histories
        );
        let _ = writeln!(out, "  labelloc=t;");
        let _ = writeln!(out, "  rankdir=TB;");
        let _ = writeln!(
            out,
            "  node [shape=box, style=filled, fontname=\"monospace\"];"
        );
        for (i, n) in self.nodes.iter().enumerate() {
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
            let _ = writeln!(
                out,
                "  n{i} [label=\"{}\\n{role}R {} W {} RW {}{unknown}{cost}\", fillcolor=\"{}\"];",
                escape(&n.function),
                n.reads,
                n.writes,
                n.read_writes,
                shade(n.cost(), max_cost)
            );
        }
        for e in &self.edges {
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
        let ranked = |role: &[FlowRole]| -> Vec<String> {
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| role.contains(&n.role))
                .map(|(i, _)| format!("n{i}"))
                .collect()
        };
        let sources = ranked(&[FlowRole::Alloc, FlowRole::AllocAndFree]);
        if !sources.is_empty() {
            let _ = writeln!(out, "  {{ rank=source; {}; }}", sources.join("; "));
        }
        let sinks = ranked(&[FlowRole::Free]);
        if !sinks.is_empty() {
            let _ = writeln!(out, "  {{ rank=sink; {}; }}", sinks.join("; "));
        }
        let _ = writeln!(out, "}}");
        out
    }
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
