//! The data flow view (paper section 3.4): per type, the functions that touch an object from
//! alloc to free, merged over its complete histories. Nodes are functions (with their reads,
//! writes, the ranges they touched and their sampled cost), edges join consecutive functions
//! of a history, weighted by how often that step happened, and count the steps that were a
//! CPU change ([`History::cpu_changes`]).

use rustc_hash::{FxHashMap, FxHashSet};

use super::assemble::History;
use super::paths::{element_samples, end_label};
use crate::resolve::function_of;
use crate::resolve::SymbolSource;
use crate::sampled::{AccessStats, SampledAccesses};
use dprof_model::histories::{
    DataFlow, EmptyFlow, EmptyFlowReason, EndReasons, FlowEdge, FlowNode, FlowRange, FlowRole, Span,
};
use dprof_model::AccessKind;

#[derive(Default)]
struct NodeAcc {
    alloc: bool,
    free: bool,
    histories: u64,
    kinds: [u64; 4],
    /// Hits by kind, per watched range.
    ranges: FxHashMap<Span, [u64; 4]>,
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

/// Builds the graph of `complete` histories of `type_name`; `ends` (how all of its histories
/// ended) says why the graph is empty when none is complete.
#[expect(
    clippy::too_many_lines,
    reason = "one pass from histories to the graph, then its ordering"
)]
pub(super) fn data_flow(
    type_name: &str,
    complete: &[&History],
    ends: &EndReasons,
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> DataFlow {
    let mut nodes: FxHashMap<String, NodeAcc> = FxHashMap::default();
    let mut edges: FxHashMap<(String, String), EdgeAcc> = FxHashMap::default();
    for history in complete {
        let alloc = function_of(symbols, history.alloc_site).0;
        nodes.entry(alloc.clone()).or_default().alloc = true;
        // The functions one after the other, consecutive steps in one function merged unless
        // the later one is a CPU change; `steps`: (index of the visit left, CPU change).
        let mut visits = vec![alloc];
        let mut steps: Vec<(usize, bool)> = Vec::new();
        let mut visit = |function: String, cpu_change: bool, visits: &mut Vec<String>| {
            let last = visits.len() - 1;
            if visits[last] == function && !cpu_change {
                return;
            }
            steps.push((last, cpu_change));
            visits.push(function);
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
            node.ranges.entry(hit.range).or_default()[k] += 1;
            if hit.insn_ip.is_some() {
                node.accesses.insert((hit.ip(), hit.range));
            }
            visit(function, hit.cpu_change, &mut visits);
        }
        let end = end_label(symbols, history);
        nodes.entry(end.clone()).or_default().free = true;
        visit(end, history.end_cpu_change(), &mut visits);

        let mut seen_nodes: FxHashSet<&str> = FxHashSet::default();
        let span = (visits.len().max(2) - 1) as f64;
        for (i, function) in visits.iter().enumerate() {
            if let Some(node) = nodes.get_mut(function) {
                node.position_sum += i as f64 / span;
                node.positions += 1;
                if seen_nodes.insert(function) {
                    node.histories += 1;
                }
            }
        }
        let mut seen_edges: FxHashSet<(&str, &str)> = FxHashSet::default();
        for &(from, cpu_change) in &steps {
            let (Some(a), Some(b)) = (visits.get(from), visits.get(from + 1)) else {
                continue;
            };
            let edge = edges.entry((a.clone(), b.clone())).or_default();
            edge.transitions += 1;
            edge.cpu_changes += u64::from(cpu_change);
            if seen_edges.insert((a, b)) {
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
        // A free node that hands objects on to another function sits among the accesses,
        // by its position, so that the steps out of it go forward.
        let hands_on = || {
            edges
                .keys()
                .any(|(from, to)| *from == function && *to != function)
        };
        let rank = match role {
            FlowRole::Alloc | FlowRole::AllocAndFree => 0,
            FlowRole::Free if !hands_on() => 2,
            FlowRole::Access | FlowRole::Free => 1,
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
                stats.add(&element_samples(s, type_name, ip, range));
            }
            super::paths::sample_match(&stats, s.hardware())
        });
        let mut ranges: Vec<FlowRange> = acc
            .ranges
            .into_iter()
            .map(|(range, kinds)| FlowRange {
                range,
                field: None,
                reads: kinds[0],
                writes: kinds[1],
                read_writes: kinds[2],
                unknown_kind: kinds[3],
            })
            .collect();
        ranges.sort_by_key(|r| r.range);
        list.push(FlowNode {
            function,
            role,
            histories: acc.histories,
            reads: acc.kinds[0],
            writes: acc.kinds[1],
            read_writes: acc.kinds[2],
            unknown_kind: acc.kinds[3],
            ranges,
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
        cpu_changes: complete.iter().map(|h| h.cpu_changes()).sum(),
        why_empty: complete
            .is_empty()
            .then(|| no_complete_history(type_name, ends)),
        nodes: list,
        edges: edge_list,
    }
}

/// Why a type whose histories all ended before the free has no graph, in the words every
/// front end shows.
fn no_complete_history(type_name: &str, ends: &EndReasons) -> EmptyFlow {
    let how: Vec<String> = [
        (ends.timeout, "timed out"),
        (ends.stopped, "stopped with collection"),
        (ends.unfinished, "with no end record"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    EmptyFlow {
        reason: EmptyFlowReason::NoCompleteHistory,
        message: format!(
            "no history of {type_name} ran from allocation to free ({}): no data flow (collect \
             longer, or with a longer --history-timeout)",
            how.join(", ")
        ),
    }
}
