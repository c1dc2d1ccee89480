//! Path traces (paper section 4.4): histories of one type grouped by execution path, the
//! sequence of (instruction, watched range, read/write, CPU change) from alloc to free, with
//! the sampled cost of each access where samples of the same type, instruction and offset
//! exist.

use rustc_hash::FxHashMap;

use super::assemble::History;
use crate::resolve::function_of;
use crate::resolve::SymbolSource;
use crate::sampled::{AccessStats, SampledAccesses};
use dprof_model::histories::{
    Convergence, EndReason, FieldOrder, PathElement, PathTrace, SampleMatch, Span,
};
use dprof_model::AccessKind;

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
pub(super) fn end_label(symbols: &dyn SymbolSource, history: &History) -> String {
    let Some(end) = history.end else {
        return "(unfinished)".to_owned();
    };
    match end.reason {
        EndReason::Freed => function_of(symbols, end.free_site).0,
        EndReason::Reallocated => "(reallocated)".to_owned(),
        EndReason::Timeout => "(timeout)".to_owned(),
        EndReason::Stopped => "(stopped)".to_owned(),
    }
}

fn path_key(symbols: &dyn SymbolSource, history: &History) -> PathKey {
    let end = end_label(symbols, history);
    let end_cpu_change = history.end_cpu_change();
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
                        field: None,
                        kind: e.kind,
                        cpu_change: e.cpu_change,
                        mean_since_alloc_ns: u64::try_from(sum / u128::from(acc.histories.max(1)))
                            .unwrap_or(u64::MAX),
                        sampled: step_samples(sampled, type_name, e.ip, e.found, e.range),
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

/// What the samples of `type_name` say about one step of a history (a path trace's or a
/// merged history's): the instruction at `ip` touching `range`. `None` without samples, when
/// the instruction was not found (`ip` is then the trap's, which no sample names) or when
/// none matched.
pub(super) fn step_samples(
    sampled: Option<&SampledAccesses>,
    type_name: &str,
    ip: u64,
    instruction_found: bool,
    range: Span,
) -> Option<SampleMatch> {
    let sampled = sampled.filter(|_| instruction_found)?;
    sample_match(
        &element_samples(sampled, type_name, ip, range),
        sampled.hardware(),
    )
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
            first_field: None,
            second: b,
            second_field: None,
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

/// The samples matched to one step, or to a data flow node's steps; `None` when none
/// matched.
pub(super) fn sample_match(stats: &AccessStats, hardware: bool) -> Option<SampleMatch> {
    (stats.samples > 0).then(|| SampleMatch {
        samples: stats.samples,
        hw_samples: stats.hw_samples,
        misses: hardware.then_some(stats.misses),
        miss_rate: (hardware && stats.hw_samples > 0)
            .then(|| stats.misses as f64 / stats.hw_samples as f64),
        mean_latency_cycles: (stats.latency_samples > 0)
            .then(|| stats.latency_sum as f64 / stats.latency_samples as f64),
        sources: stats.source_counts(),
    })
}
