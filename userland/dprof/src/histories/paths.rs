//! Path traces (paper section 4.4): histories of one type grouped by execution path, the
//! sequence of (instruction, watched range, read/write, CPU change) from alloc to free, with
//! the sampled cost of each access where samples of the same type, instruction and offset
//! exist.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::{function_of, EndReason, History, Span};
use crate::analysis::{AccessStats, SampledAccesses};
use crate::decode::AccessKind;
use crate::resolve::SymbolSource;

/// One access along a path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathElement {
    /// Function of the accessing instruction (or of the trap ip when it was not found).
    pub function: String,
    /// Offset of the instruction in it.
    pub function_offset: u64,
    /// The accessing instruction's address (the trap ip when not found).
    pub ip: u64,
    /// Whether the accessing instruction was found (see [`super::HitCheck`]).
    pub instruction_found: bool,
    /// The watched range it touched.
    pub range: Span,
    /// Read, write or both, when known.
    pub kind: Option<AccessKind>,
    /// It ran on another CPU than the access before (the allocating CPU for the first).
    pub cpu_change: bool,
    /// Mean time since allocation over the path's histories (ns).
    pub mean_since_alloc_ns: u64,
    /// Samples of the same type, instruction and offset range; absent when none matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampleMatch>,
}

/// What access samples say about one instruction and offset range of a type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleMatch {
    /// Matching samples.
    pub samples: u64,
    /// Of them, samples with a hardware hit/miss status.
    pub hw_samples: u64,
    /// L1 data-cache misses (hardware samplers only).
    pub misses: Option<u64>,
    /// `misses / hw_samples`.
    pub miss_rate: Option<f64>,
    /// Mean latency in cycles, when the hardware gave latencies.
    pub mean_latency_cycles: Option<f64>,
}

impl SampleMatch {
    /// `None` when no sample matched.
    pub(super) fn of(stats: &AccessStats, hardware: bool) -> Option<Self> {
        (stats.samples > 0).then(|| Self {
            samples: stats.samples,
            hw_samples: stats.hw_samples,
            misses: hardware.then_some(stats.misses),
            miss_rate: (hardware && stats.hw_samples > 0)
                .then(|| stats.misses as f64 / stats.hw_samples as f64),
            mean_latency_cycles: (stats.latency_samples > 0)
                .then(|| stats.latency_sum as f64 / stats.latency_samples as f64),
        })
    }
}

/// Histories of one type that took the same path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathTrace {
    /// Histories that took it (its frequency).
    pub histories: u64,
    /// `histories` / the type's complete histories.
    pub share: f64,
    /// The allocating function.
    pub alloc_function: String,
    /// The freeing function, or `(reallocated)` when the free was not traced.
    pub end: String,
    /// The object was freed on another CPU than its last access (or its allocation).
    pub end_cpu_change: bool,
    /// The accesses, in time order.
    pub elements: Vec<PathElement>,
}

/// How fast new paths stopped appearing (the paper found 30 to 100 histories enough).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Convergence {
    /// Complete histories, in start order.
    pub histories: u64,
    /// Distinct paths among them.
    pub paths: u64,
    /// The history count (1-based) at which each new path appeared.
    pub new_path_at: Vec<u64>,
    /// The history count at which the last new path appeared: histories after it found none.
    pub last_new_path_at: u64,
}

/// The order of the first accesses to two ranges watched together (a pairwise history).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldOrder {
    /// The range at the lower offset.
    pub first: Span,
    /// The other.
    pub second: Span,
    /// Histories that watched this pair.
    pub histories: u64,
    /// `first` was touched before `second`.
    pub first_before_second: u64,
    /// `second` was touched before `first`.
    pub second_before_first: u64,
    /// Only one of the two was touched, or neither.
    pub one_or_none: u64,
}

/// Path traces, convergence and field orders of one type.
pub(super) struct Traces {
    pub(super) paths: Vec<PathTrace>,
    pub(super) convergence: Convergence,
    pub(super) field_orders: Vec<FieldOrder>,
}

/// What makes two histories take the same path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PathKey {
    alloc_site_function: String,
    elements: Vec<ElementKey>,
    end: String,
    end_cpu_change: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ElementKey {
    ip: u64,
    found: bool,
    range: Span,
    kind: Option<AccessKind>,
    cpu_change: bool,
}

struct PathAcc {
    key: PathKey,
    histories: u64,
    since_alloc_sums: Vec<u128>,
}

/// The end of a complete history as paths name it.
pub(super) fn end_label(symbols: &dyn SymbolSource, history: &History) -> (String, bool) {
    let Some(end) = history.end else {
        return ("(unfinished)".to_owned(), false);
    };
    let last_cpu = history.hits.last().map_or(history.start_cpu, |h| h.cpu);
    let label = match end.reason {
        EndReason::Freed => function_of(symbols, end.free_site).0,
        EndReason::Reallocated => "(reallocated)".to_owned(),
        EndReason::Timeout => "(timeout)".to_owned(),
        EndReason::Stopped => "(stopped)".to_owned(),
    };
    (label, end.cpu != last_cpu)
}

fn path_key(symbols: &dyn SymbolSource, history: &History) -> PathKey {
    let (end, end_cpu_change) = end_label(symbols, history);
    PathKey {
        alloc_site_function: function_of(symbols, history.alloc_site).0,
        elements: history
            .hits
            .iter()
            .map(|h| ElementKey {
                ip: h.ip(),
                found: h.insn_ip.is_some(),
                range: h.range,
                kind: h.kind,
                cpu_change: h.cpu_change,
            })
            .collect(),
        end,
        end_cpu_change,
    }
}

/// Groups `complete` histories (of type `type_name`, in start order) by path.
pub(super) fn path_traces(
    type_name: &str,
    complete: &[&History],
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> Traces {
    let mut index: FxHashMap<PathKey, usize> = FxHashMap::default();
    let mut accs: Vec<PathAcc> = Vec::new();
    let mut convergence = Convergence::default();
    for (n, history) in complete.iter().enumerate() {
        let key = path_key(symbols, history);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            convergence.new_path_at.push(n as u64 + 1);
            accs.push(PathAcc {
                since_alloc_sums: vec![0; key.elements.len()],
                key,
                histories: 0,
            });
            accs.len() - 1
        });
        if let Some(acc) = accs.get_mut(i) {
            acc.histories += 1;
            for (sum, hit) in acc.since_alloc_sums.iter_mut().zip(&history.hits) {
                *sum += u128::from(hit.since_alloc_ns);
            }
        }
    }
    convergence.histories = complete.len() as u64;
    convergence.paths = accs.len() as u64;
    convergence.last_new_path_at = convergence.new_path_at.last().copied().unwrap_or(0);
    // Most frequent first; ties in the order they were first seen.
    accs.sort_by_key(|a| std::cmp::Reverse(a.histories));
    let total = complete.len().max(1) as f64;
    let paths = accs
        .into_iter()
        .map(|acc| PathTrace {
            histories: acc.histories,
            share: acc.histories as f64 / total,
            alloc_function: acc.key.alloc_site_function,
            end: acc.key.end,
            end_cpu_change: acc.key.end_cpu_change,
            elements: acc
                .key
                .elements
                .iter()
                .zip(&acc.since_alloc_sums)
                .map(|(e, &sum)| {
                    let (function, function_offset) = function_of(symbols, e.ip);
                    PathElement {
                        function,
                        function_offset,
                        ip: e.ip,
                        instruction_found: e.found,
                        range: e.range,
                        kind: e.kind,
                        cpu_change: e.cpu_change,
                        mean_since_alloc_ns: u64::try_from(sum / u128::from(acc.histories.max(1)))
                            .unwrap_or(u64::MAX),
                        sampled: sampled.filter(|_| e.found).and_then(|s| {
                            SampleMatch::of(
                                &element_samples(s, type_name, e.ip, e.range),
                                s.hardware(),
                            )
                        }),
                    }
                })
                .collect(),
        })
        .collect();
    Traces {
        paths,
        convergence,
        field_orders: field_orders(complete),
    }
}

/// Samples of `type_name` by the instruction at `ip` inside `range`.
pub(super) fn element_samples(
    sampled: &SampledAccesses,
    type_name: &str,
    ip: u64,
    range: Span,
) -> AccessStats {
    let start = u64::from(range.offset);
    sampled.matching(type_name, ip, start..start + u64::from(range.len))
}

/// Which of two ranges watched together was touched first, per pair.
fn field_orders(histories: &[&History]) -> Vec<FieldOrder> {
    let mut pairs: FxHashMap<(Span, Span), FieldOrder> = FxHashMap::default();
    for h in histories {
        let [a, b] = match *h.ranges.as_slice() {
            [x, y] if x.offset <= y.offset => [x, y],
            [x, y] => [y, x],
            _ => continue,
        };
        let first_hit = |r: Span| h.hits.iter().position(|hit| hit.range == r);
        let order = pairs.entry((a, b)).or_insert(FieldOrder {
            first: a,
            second: b,
            histories: 0,
            first_before_second: 0,
            second_before_first: 0,
            one_or_none: 0,
        });
        order.histories += 1;
        match (first_hit(a), first_hit(b)) {
            (Some(x), Some(y)) if x < y => order.first_before_second += 1,
            (Some(_), Some(_)) => order.second_before_first += 1,
            _ => order.one_or_none += 1,
        }
    }
    let mut out: Vec<FieldOrder> = pairs.into_values().collect();
    out.sort_by(|x, y| {
        y.histories
            .cmp(&x.histories)
            .then((x.first, x.second).cmp(&(y.first, y.second)))
    });
    out
}
