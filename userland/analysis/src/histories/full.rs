//! Whole-object histories (`--histories full:TYPE`, the paper's section 4.3 and table 14):
//! a type's histories over chunks of its object (up to four chunks a target, so that every
//! pair of chunks is watched together by some target), matched into history sets and merged
//! set by set into one ordered access history of the whole object; the distinct merged paths,
//! how fast they converged, and what collecting them cost.
//!
//! A *round* is, for each of the plan's targets, its k-th complete history (in start order;
//! freed, with a traced free) and its failed tries since its previous complete one (timed
//! out, reallocated, cut): what the module collected, and what it cost ([`SetCost`]).
//!
//! A *set* is one complete history of each target, matched as the paper does ("by matching
//! up common access patterns to the same offset", [`match_sets`]): each target gives the
//! history whose accesses to the chunks already in the set, by instruction and kind, agree
//! on the most chunks. Objects of a type take several paths (an `sk_buff` that carries data,
//! one that acks), and the histories of one round watch different objects: matching puts
//! objects that did the same to the chunks they share together, where round k would mix
//! them.
//!
//! The merge of a set ([`merge_set`]): each chunk's *reference* accesses are its (instruction,
//! kind) sequence in the set's first history (in plan order, as matched) that watched it; a history
//! *agrees* when its accesses to each of its chunks are that chunk's reference, and then its
//! interleaving orders its chunks' accesses exactly. The merged order is a topological order
//! of every chunk's reference accesses under the agreeing histories' orderings; what none
//! orders (and the rare cycle between them) is ordered by mean time since allocation. A
//! history that does not agree orders nothing, and is counted.

#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap;

use super::assemble::{History, Hit};
use super::paths::{end_label, step_samples};
use crate::resolve::{function_of, SymbolSource};
use crate::sampled::SampledAccesses;
use dprof_format::FullCoveragePlan;
use dprof_model::histories::{EndReason, FullCoverage, MergedPath, MergedStep, SetCost, Span};
use dprof_model::AccessKind;

/// The whole-object view of a type collected with `plan`; `list` is every history of the
/// type (complete or not), in start order. Each merged step gets what `sampled` says of the
/// type's accesses by its instruction to its chunk, as a path trace's step does.
pub(super) fn full_coverage(
    plan: &FullCoveragePlan,
    list: &[&History],
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> FullCoverage {
    let type_name = plan.type_name.as_str();
    let mut by_target: FxHashMap<u32, Vec<&History>> = FxHashMap::default();
    for &h in list {
        by_target.entry(h.target).or_default().push(h);
    }
    let tries: Vec<Vec<Try<'_>>> = plan
        .targets
        .iter()
        .map(|target| tries_of(by_target.get(target).into_iter().flatten().copied()))
        .collect();
    let round_count = tries.iter().map(Vec::len).max().unwrap_or(0);
    let complete_rounds = tries
        .iter()
        .map(|t| t.iter().filter(|x| x.complete.is_some()).count())
        .min()
        .unwrap_or(0);
    let cost: Vec<SetCost> = (0..round_count)
        .map(|k| {
            set_cost(
                k,
                k < complete_rounds,
                tries.iter().filter_map(|t| t.get(k)),
            )
        })
        .collect();
    let total_cost = cost.iter().fold(SetCost::default(), |sum, c| SetCost {
        set: 0,
        complete: false,
        histories: sum.histories + c.histories,
        complete_histories: sum.complete_histories + c.complete_histories,
        hits: sum.hits + c.hits,
        wall_ns: sum.wall_ns + c.wall_ns,
    });

    let mut chunks: Vec<Span> = plan
        .targets
        .iter()
        .filter_map(|target| by_target.get(target))
        .flatten()
        .flat_map(|h| h.ranges.iter().copied())
        .collect();
    chunks.sort_unstable();
    chunks.dedup();

    // Each target's complete histories, in start order, without mismatched hits.
    let pools: Vec<Vec<History>> = tries
        .iter()
        .map(|t| {
            t.iter()
                .filter_map(|x| x.complete)
                .map(History::without_mismatches)
                .collect()
        })
        .collect();
    let matched = match_sets(&pools);
    let pooled: usize = pools.iter().map(Vec::len).sum();
    let unmatched_histories = (pooled - matched.len() * pools.len()) as u64;

    let merged = merge_matched(&pools, &matched, symbols);
    let MergedSets {
        mut groups,
        distinct_paths_after,
        last_new_path_at,
        cycles_broken,
        unmerged_histories,
    } = merged;
    // Most frequent first; ties in the order they were first seen.
    groups.sort_by_key(|g| std::cmp::Reverse(g.sets));
    let total = matched.len().max(1) as f64;
    FullCoverage {
        object_size: plan.object_size,
        chunks,
        targets: plan.targets.len() as u64,
        sets: matched.len() as u64,
        rounds: complete_rounds as u64,
        incomplete_rounds: (round_count - complete_rounds) as u64,
        unmatched_histories,
        unmerged_histories,
        cycles_broken,
        distinct_paths_after,
        last_new_path_at,
        cost,
        total_cost,
        paths: groups
            .into_iter()
            .map(|g| merged_path(g, total, symbols, type_name, sampled))
            .collect(),
    }
}

/// The matched sets merged and grouped by path.
struct MergedSets {
    /// In the order first seen.
    groups: Vec<PathGroup>,
    distinct_paths_after: Vec<u64>,
    last_new_path_at: u64,
    cycles_broken: u64,
    unmerged_histories: u64,
}

/// Merges each set of `matched` (indices into `pools`, per target) and groups them by path.
fn merge_matched(
    pools: &[Vec<History>],
    matched: &[Vec<usize>],
    symbols: &dyn SymbolSource,
) -> MergedSets {
    let mut out = MergedSets {
        groups: Vec::new(),
        distinct_paths_after: Vec::with_capacity(matched.len()),
        last_new_path_at: 0,
        cycles_broken: 0,
        unmerged_histories: 0,
    };
    let mut index: FxHashMap<PathKey, usize> = FxHashMap::default();
    for (k, members) in matched.iter().enumerate() {
        // In plan order, as matched: each chunk's reference is then the accesses the set was
        // matched on.
        let set: Vec<History> = pools
            .iter()
            .zip(members)
            .filter_map(|(pool, &i)| pool.get(i).cloned())
            .collect();
        let merged = merge_set(&set, symbols);
        out.cycles_broken += merged.cycles_broken;
        out.unmerged_histories += merged.unmerged;
        let groups = &mut out.groups;
        let i = *index.entry(merged.key.clone()).or_insert_with(|| {
            out.last_new_path_at = k as u64 + 1;
            groups.push(PathGroup {
                since_alloc_sums: vec![0; merged.key.steps.len()],
                key: merged.key.clone(),
                sets: 0,
            });
            groups.len() - 1
        });
        if let Some(group) = groups.get_mut(i) {
            group.sets += 1;
            for (sum, t) in group
                .since_alloc_sums
                .iter_mut()
                .zip(&merged.since_alloc_ns)
            {
                *sum += u128::from(*t);
            }
        }
        out.distinct_paths_after.push(groups.len() as u64);
    }
    out
}

/// One target's histories for one set: its complete one, and the tries that failed before.
struct Try<'h> {
    histories: Vec<&'h History>,
    complete: Option<&'h History>,
}

/// Whether a history makes a set: freed with a traced free. A reallocated object's free was
/// not traced (its time, CPU and function are unknown), so the module tries again, as after
/// a timeout.
fn completes_set(h: &History) -> bool {
    h.end.is_some_and(|e| e.reason == EndReason::Freed)
}

/// A target's histories (in start order) cut after each one that completes a set; the tries
/// after the last one make a last, incomplete entry.
fn tries_of<'h>(histories: impl Iterator<Item = &'h History>) -> Vec<Try<'h>> {
    let mut out = Vec::new();
    let mut pending: Vec<&History> = Vec::new();
    for h in histories {
        pending.push(h);
        if completes_set(h) {
            out.push(Try {
                histories: std::mem::take(&mut pending),
                complete: Some(h),
            });
        }
    }
    if !pending.is_empty() {
        out.push(Try {
            histories: pending,
            complete: None,
        });
    }
    out
}

/// One access as matching compares it: the instruction and whether it read or wrote.
type AccessKey = (u64, Option<AccessKind>);

/// Each watched chunk's accesses in `h`, in order (empty for a chunk it never touched).
fn chunk_accesses(h: &History) -> FxHashMap<Span, Vec<AccessKey>> {
    let mut out: FxHashMap<Span, Vec<AccessKey>> =
        h.ranges.iter().map(|&c| (c, Vec::new())).collect();
    for hit in &h.hits {
        out.entry(hit.range).or_default().push((hit.ip(), hit.kind));
    }
    out
}

/// Candidates a target's matching looks at, the oldest unused first: keeps matching linear in
/// the histories when a plan has thousands of targets.
const MATCH_WINDOW: usize = 64;

/// History sets matched among the targets' complete histories (`pools`, one per target), as
/// the paper merges "by matching up common access patterns to the same offset": a set starts
/// from the first target's next history; every other target, in plan order, gives the unused
/// history (of its oldest [`MATCH_WINDOW`]) whose accesses agree with the set's on the most
/// chunks already in the set, the oldest among equals; its chunks new to the set join it.
/// Sets end when a target has no history left. Each set lists, per target, the index of its
/// history in the pool.
fn match_sets(pools: &[Vec<History>]) -> Vec<Vec<usize>> {
    let accesses: Vec<Vec<FxHashMap<Span, Vec<AccessKey>>>> = pools
        .iter()
        .map(|pool| pool.iter().map(chunk_accesses).collect())
        .collect();
    let mut unused: Vec<Vec<usize>> = pools.iter().map(|p| (0..p.len()).collect()).collect();
    let mut sets = Vec::new();
    let Some(seeds) = accesses.first() else {
        return sets;
    };
    for (seed, seed_accesses) in seeds.iter().enumerate() {
        if unused.iter().skip(1).any(Vec::is_empty) {
            break;
        }
        let mut set_accesses: FxHashMap<Span, &[AccessKey]> = seed_accesses
            .iter()
            .map(|(&c, a)| (c, a.as_slice()))
            .collect();
        let mut members = vec![seed];
        for (candidates, free) in accesses.iter().zip(unused.iter_mut()).skip(1) {
            let agreeing = |a: &FxHashMap<Span, Vec<AccessKey>>| {
                a.iter()
                    .filter(|(c, seq)| set_accesses.get(*c) == Some(&seq.as_slice()))
                    .count()
            };
            // The most agreeing chunks, the oldest among equals.
            let Some((at, i)) = free
                .iter()
                .take(MATCH_WINDOW)
                .enumerate()
                .max_by_key(|&(at, &i)| {
                    let agreed = candidates.get(i).map_or(0, agreeing);
                    (agreed, std::cmp::Reverse(at))
                })
                .map(|(at, &i)| (at, i))
            else {
                break;
            };
            free.remove(at);
            if let Some(a) = candidates.get(i) {
                for (&c, seq) in a {
                    set_accesses.entry(c).or_insert(seq.as_slice());
                }
            }
            members.push(i);
        }
        sets.push(members);
    }
    sets
}

/// What set `k` (0-based) cost over its targets' tries.
fn set_cost<'a>(k: usize, complete: bool, tries: impl Iterator<Item = &'a Try<'a>>) -> SetCost {
    let mut cost = SetCost {
        set: k as u64 + 1,
        complete,
        ..SetCost::default()
    };
    let mut first_start = u64::MAX;
    let mut last_end = 0;
    for h in tries.flat_map(|t| &t.histories) {
        cost.histories += 1;
        cost.complete_histories += u64::from(completes_set(h));
        cost.hits += h.hits.len() as u64;
        first_start = first_start.min(h.start_ns);
        // A history with no end record ends, as far as the profile knows, at its last hit.
        let end = h
            .end
            .map(|e| e.time_ns)
            .or_else(|| h.hits.last().map(|hit| hit.time_ns))
            .unwrap_or(h.start_ns);
        last_end = last_end.max(end);
    }
    cost.wall_ns = last_end.saturating_sub(first_start);
    cost
}

/// What makes two merged histories take the same path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PathKey {
    alloc_function: String,
    steps: Vec<StepKey>,
    end: String,
    end_cpu: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StepKey {
    ip: u64,
    found: bool,
    chunk: Span,
    kind: Option<AccessKind>,
    cpu: u32,
}

/// One merged set.
pub(super) struct MergedSet {
    key: PathKey,
    /// Mean time since allocation of each step, in `key.steps` order.
    since_alloc_ns: Vec<u64>,
    /// Histories whose accesses to a chunk differed from the chunk's reference.
    unmerged: u64,
    /// Cycles among the agreeing orderings, broken by time.
    cycles_broken: u64,
}

/// One access of the merged history: a chunk's reference access.
struct Event<'h> {
    hit: &'h Hit,
    /// Index in the set of the history it comes from (its chunk's reference).
    source: usize,
    since_alloc_sum: u128,
    seen: u64,
}

/// Merges one set's complete histories (without mismatched hits, in plan order: the first to watch a chunk gives its reference) into one
/// path (see the module doc).
pub(super) fn merge_set(set: &[History], symbols: &dyn SymbolSource) -> MergedSet {
    // Each chunk's reference: its events, from the first history that watched it.
    let mut events: Vec<Event<'_>> = Vec::new();
    let mut reference: FxHashMap<Span, Vec<usize>> = FxHashMap::default();
    for (source, h) in set.iter().enumerate() {
        for &chunk in &h.ranges {
            reference.entry(chunk).or_insert_with(|| {
                h.hits
                    .iter()
                    .filter(|hit| hit.range == chunk)
                    .map(|hit| {
                        events.push(Event {
                            hit,
                            source,
                            since_alloc_sum: 0,
                            seen: 0,
                        });
                        events.len() - 1
                    })
                    .collect()
            });
        }
    }
    // Successors, with repeats: a constraint seen by several pairs counts once per pair,
    // in the in-degrees as in the lists.
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); events.len()];
    for ids in reference.values() {
        for w in ids.windows(2) {
            after[w[0]].push(w[1]);
        }
    }
    let mut unmerged = 0;
    for h in set {
        let Some(ids) = agreeing_events(h, &reference, &events) else {
            unmerged += 1;
            continue;
        };
        for (&id, hit) in ids.iter().zip(&h.hits) {
            if let Some(e) = events.get_mut(id) {
                e.since_alloc_sum += u128::from(hit.since_alloc_ns);
                e.seen += 1;
            }
        }
        for w in ids.windows(2) {
            if chunk_of(&events, w[0]) != chunk_of(&events, w[1]) {
                after[w[0]].push(w[1]);
            }
        }
    }
    let mean = |e: &Event<'_>| {
        if e.seen == 0 {
            e.hit.since_alloc_ns
        } else {
            u64::try_from(e.since_alloc_sum / u128::from(e.seen)).unwrap_or(u64::MAX)
        }
    };
    let (order, cycles_broken) = topological_order(&events, &after, |e| {
        (mean(e), e.hit.range.offset, e.hit.time_ns)
    });

    let labels: Vec<Vec<u32>> = set.iter().map(cpu_order).collect();
    let label = |source: usize, cpu: u32| -> u32 {
        labels
            .get(source)
            .and_then(|l| l.iter().position(|&c| c == cpu))
            .map_or(u32::MAX, |p| p as u32)
    };
    let mut steps = Vec::with_capacity(order.len());
    let mut since_alloc_ns = Vec::with_capacity(order.len());
    for &id in &order {
        let e = &events[id];
        steps.push(StepKey {
            ip: e.hit.ip(),
            found: e.hit.insn_ip.is_some(),
            chunk: e.hit.range,
            kind: e.hit.kind,
            cpu: label(e.source, e.hit.cpu),
        });
        since_alloc_ns.push(mean(e));
    }
    // The free as seen by the history of the last access, so that its CPU label and the last
    // step's are of one history.
    let end_source = order.last().map_or(0, |&id| events[id].source);
    let (end, end_cpu) = set.get(end_source).map_or_else(
        || ("(none)".to_owned(), 0),
        |h| {
            (
                end_label(symbols, h),
                h.end.map_or(0, |e| label(end_source, e.cpu)),
            )
        },
    );
    MergedSet {
        key: PathKey {
            alloc_function: set
                .first()
                .map_or_else(String::new, |h| function_of(symbols, h.alloc_site).0),
            steps,
            end,
            end_cpu,
        },
        since_alloc_ns,
        unmerged,
        cycles_broken,
    }
}

fn chunk_of(events: &[Event<'_>], id: usize) -> Option<Span> {
    events.get(id).map(|e| e.hit.range)
}

/// The events `h`'s hits are, in its order, when its accesses to each of its chunks are the
/// chunk's reference (by instruction and kind); `None` when they differ.
fn agreeing_events(
    h: &History,
    reference: &FxHashMap<Span, Vec<usize>>,
    events: &[Event<'_>],
) -> Option<Vec<usize>> {
    let mut next: FxHashMap<Span, usize> = FxHashMap::default();
    let mut out = Vec::with_capacity(h.hits.len());
    for hit in &h.hits {
        let n = next.entry(hit.range).or_default();
        let id = *reference.get(&hit.range)?.get(*n)?;
        let e = events.get(id)?;
        if e.hit.ip() != hit.ip() || e.hit.kind != hit.kind {
            return None;
        }
        *n += 1;
        out.push(id);
    }
    // Fewer accesses to a chunk than its reference differ too.
    for &chunk in &h.ranges {
        let seen = next.get(&chunk).copied().unwrap_or(0);
        if reference.get(&chunk).map_or(0, Vec::len) != seen {
            return None;
        }
    }
    Some(out)
}

/// The events in an order that keeps every `after` constraint, the smallest `rank` first
/// among those free to go; when a cycle leaves none free, the smallest `rank` of the rest
/// goes (counted).
fn topological_order<R: Ord>(
    events: &[Event<'_>],
    after: &[Vec<usize>],
    rank: impl Fn(&Event<'_>) -> R,
) -> (Vec<usize>, u64) {
    let mut in_degree = vec![0usize; events.len()];
    for &next in after.iter().flatten() {
        in_degree[next] += 1;
    }
    let mut placed = vec![false; events.len()];
    let mut order = Vec::with_capacity(events.len());
    let mut cycles_broken = 0;
    while order.len() < events.len() {
        let pick = |free_only: bool| {
            (0..events.len())
                .filter(|&i| !placed[i] && (!free_only || in_degree[i] == 0))
                .min_by_key(|&i| rank(&events[i]))
        };
        let Some(next) = pick(true).or_else(|| {
            cycles_broken += 1;
            pick(false)
        }) else {
            break;
        };
        placed[next] = true;
        order.push(next);
        for &succ in &after[next] {
            in_degree[succ] = in_degree[succ].saturating_sub(1);
        }
    }
    (order, cycles_broken)
}

/// A history's CPUs in order of first appearance: the allocating one, its hits', the free's.
fn cpu_order(h: &History) -> Vec<u32> {
    let mut out = vec![h.start_cpu];
    let cpus = h
        .hits
        .iter()
        .map(|hit| hit.cpu)
        .chain(h.end.filter(|e| e.reason.is_complete()).map(|e| e.cpu));
    for cpu in cpus {
        if !out.contains(&cpu) {
            out.push(cpu);
        }
    }
    out
}

/// Sets that merged into one path.
struct PathGroup {
    key: PathKey,
    sets: u64,
    since_alloc_sums: Vec<u128>,
}

fn merged_path(
    g: PathGroup,
    total_sets: f64,
    symbols: &dyn SymbolSource,
    type_name: &str,
    sampled: Option<&SampledAccesses>,
) -> MergedPath {
    let mut prev_cpu = 0;
    let steps = g
        .key
        .steps
        .iter()
        .zip(&g.since_alloc_sums)
        .map(|(s, &sum)| {
            let (function, function_offset) = function_of(symbols, s.ip);
            let cpu_change = s.cpu != prev_cpu;
            prev_cpu = s.cpu;
            MergedStep {
                function,
                function_offset,
                ip: s.ip,
                instruction_found: s.found,
                chunk: s.chunk,
                field: None,
                kind: s.kind,
                cpu: s.cpu,
                cpu_change,
                mean_since_alloc_ns: u64::try_from(sum / u128::from(g.sets.max(1)))
                    .unwrap_or(u64::MAX),
                sampled: step_samples(sampled, type_name, s.ip, s.found, s.chunk),
            }
        })
        .collect();
    MergedPath {
        sets: g.sets,
        share: g.sets as f64 / total_sets,
        alloc_function: g.key.alloc_function,
        end: g.key.end,
        end_cpu: g.key.end_cpu,
        end_cpu_change: g.key.end_cpu != prev_cpu,
        steps,
    }
}
