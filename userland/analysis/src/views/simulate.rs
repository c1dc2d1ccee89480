//! The working set's cache simulation (paper section 3.2): objects from the address set
//! (their lifetimes), accesses from the path traces when the type has them (a path drawn by
//! frequency: its offsets, its CPU changes, its times since allocation), otherwise from the
//! type's sampled offsets (every touched line once per round, rounds spread over the object's
//! life, on CPUs drawn from the type's samples); an object's lines leave the caches at its
//! free. Residency per type and level is sampled at the live series' times and averaged.
//!
//! With more eligible objects than [`super::ViewOptions::sim_objects`], a seeded random
//! `1/2^k` of them is simulated (the largest such share within the cap) in caches with `1/2^k`
//! of each level's sets and the same ways: each simulated set then sees about as many lines
//! as a set of the whole simulation, so the pressure that decides what stays is kept (fewer
//! objects in a full-size cache would all fit). Each type's resident lines are scaled by the
//! inverse of its share simulated (then capped, all types together, at what the level holds).

use std::time::Instant;

use super::layout::Layout;
use super::recorded::{Recorded, ViewOptions};
use crate::cache::sim::Hierarchy;
use crate::cache::CacheModel;
use dprof_model::cache::CacheLevel;
use dprof_model::histories::PathTrace;
use dprof_model::working_set::SimulationStats;
use dprof_model::Report;

/// Rounds of accesses per object at most, for types without path traces.
const MAX_ROUNDS: u64 = 8;

/// `cpu` of a free event.
const FREE: u32 = u32::MAX;

/// One simulated event.
#[derive(Clone, Copy, Debug)]
struct Event {
    time: u64,
    addr: u64,
    object: u32,
    /// Accessing CPU, or [`FREE`].
    cpu: u32,
}

/// xorshift64*: deterministic and fast; the simulation needs reproducible choices, not
/// cryptographic ones.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform below `n` (0 for 0).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
        }
    }

    /// An index drawn with probability proportional to `weights[i]`; `None` when they sum
    /// to 0.
    fn weighted(&mut self, weights: impl Iterator<Item = u64> + Clone) -> Option<usize> {
        let total: u64 = weights.clone().sum();
        if total == 0 {
            return None;
        }
        let mut pick = self.below(total);
        for (i, w) in weights.enumerate() {
            if pick < w {
                return Some(i);
            }
            pick -= w;
        }
        None
    }
}

/// How one type's objects access memory.
struct TypeModel<'r> {
    paths: &'r [PathTrace],
    /// `(cpu, samples)`.
    cpus: Vec<(u32, u64)>,
    rounds: u64,
}

/// Mean resident lines per layout type and level, and what the simulation did.
pub(super) fn simulate(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    model: &CacheModel,
    options: &ViewOptions,
) -> (Vec<Vec<f64>>, SimulationStats) {
    let started = Instant::now();
    let mut stats = SimulationStats {
        seed: options.seed,
        sets_fraction: 1.0,
        ..SimulationStats::default()
    };
    let Some(min_shift) = model.levels.iter().map(CacheLevel::line_shift).min() else {
        return (Vec::new(), stats);
    };
    let mut rng = Rng::new(options.seed);
    let (chosen, eligible_per_type, share_shift) =
        choose_objects(layout, options.sim_objects, &mut rng);
    stats.eligible_objects = eligible_per_type.iter().sum();
    stats.objects = chosen.len() as u64;
    stats.sets_fraction = 1.0 / f64::from(1u32 << share_shift.min(31));
    let mut simulated_per_type = vec![0u64; layout.types.len()];
    for &(ti, _) in &chosen {
        simulated_per_type[ti] += 1;
    }
    let models = type_models(report, layout);
    let events = make_events(
        report, recorded, layout, &models, &chosen, min_shift, &mut rng, &mut stats,
    );
    let shrunk: Vec<CacheLevel> = model
        .levels
        .iter()
        .map(|l| {
            let sets = (l.sets >> share_shift).max(1);
            CacheLevel {
                sets,
                size_bytes: sets * u64::from(l.ways) * u64::from(l.line_bytes),
                ..l.clone()
            }
        })
        .collect();
    let mut caches = Hierarchy::new(&shrunk);
    let sums = run(
        recorded,
        layout,
        &events,
        &simulated_per_type,
        min_shift,
        &mut caches,
        &mut stats,
    );
    // What each level of the whole hierarchy holds: the shrunk caches' capacity, scaled back.
    let capacities: Vec<f64> = model
        .levels
        .iter()
        .zip(&shrunk)
        .enumerate()
        .map(|(i, (full, small))| caches.capacity(i) as f64 * full.sets as f64 / small.sets as f64)
        .collect();
    let means = scaled_means(
        &sums,
        layout.times.len(),
        &eligible_per_type,
        &simulated_per_type,
        &capacities,
    );
    stats.seconds = started.elapsed().as_secs_f64();
    stats.accesses_per_second = if stats.seconds > 0.0 {
        stats.accesses as f64 / stats.seconds
    } else {
        0.0
    };
    (means, stats)
}

/// `(type index, lifetime)` of the objects to simulate, in allocation order: every object
/// whose lines are known, or a uniform random choice of `1/2^k` of them, the largest such
/// share within `cap`; how many were eligible per type; and `k`.
fn choose_objects(
    layout: &Layout,
    cap: usize,
    rng: &mut Rng,
) -> (Vec<(usize, u32)>, Vec<u64>, u32) {
    let mut eligible: Vec<(usize, u32)> = layout
        .types
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.levels.is_empty())
        .flat_map(|(ti, t)| t.objects.iter().map(move |&o| (ti, o)))
        .collect();
    let mut per_type = vec![0u64; layout.types.len()];
    for &(ti, _) in &eligible {
        per_type[ti] += 1;
    }
    let mut shift = 0;
    while eligible.len() >> shift > cap.max(1) {
        shift += 1;
    }
    let keep = eligible.len() >> shift;
    if keep < eligible.len() {
        // A partial Fisher-Yates shuffle: the first `keep` are a uniform choice.
        for i in 0..keep {
            let j = i + rng.below((eligible.len() - i) as u64) as usize;
            eligible.swap(i, j);
        }
        eligible.truncate(keep);
        eligible.sort_unstable_by_key(|&(_, o)| o);
    }
    (eligible, per_type, shift)
}

/// Paths, CPUs and rounds of each layout type.
fn type_models<'r>(report: &'r Report, layout: &Layout) -> Vec<TypeModel<'r>> {
    layout
        .types
        .iter()
        .map(|t| {
            let profile = report.find_type(&t.name);
            let samples = profile.map_or(0, |p| p.samples);
            TypeModel {
                paths: report
                    .histories
                    .as_ref()
                    .and_then(|h| h.find_type(&t.name))
                    .map_or(&[][..], |h| h.paths.as_slice()),
                cpus: profile.map_or_else(Vec::new, |p| {
                    p.cpus.iter().map(|c| (c.cpu, c.samples)).collect()
                }),
                rounds: (samples / (t.objects.len() as u64).max(1)).clamp(1, MAX_ROUNDS),
            }
        })
        .collect()
}

/// The accesses and frees of the chosen objects, in time order.
#[expect(
    clippy::too_many_arguments,
    reason = "the simulation's inputs, each used once"
)]
fn make_events(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    models: &[TypeModel<'_>],
    chosen: &[(usize, u32)],
    min_shift: u32,
    rng: &mut Rng,
    stats: &mut SimulationStats,
) -> Vec<Event> {
    let cpus = report.profile.online_cpus.max(1);
    let mut events: Vec<Event> = Vec::new();
    let mut lines = Vec::new();
    for &(ti, object) in chosen {
        let (Some(l), Some(t), Some(m)) = (
            recorded.lifetimes.get(object as usize),
            layout.types.get(ti),
            models.get(ti),
        ) else {
            continue;
        };
        let last = l
            .end_ns
            .map_or(layout.span.1, |e| e.saturating_sub(1))
            .max(l.alloc_ns);
        let at = |since: u64| l.alloc_ns.saturating_add(since).min(last);
        let path = rng.weighted(m.paths.iter().map(|p| p.histories));
        if let Some(path) = path.and_then(|p| m.paths.get(p)) {
            stats.objects_from_paths += 1;
            let mut cpu = l.alloc_cpu;
            for e in &path.elements {
                if e.cpu_change && cpus > 1 {
                    cpu = (cpu + 1 + rng.below(u64::from(cpus - 1)) as u32) % cpus;
                }
                events.push(Event {
                    time: at(e.mean_since_alloc_ns),
                    addr: l.base.wrapping_add(u64::from(e.range.offset)),
                    object,
                    cpu,
                });
            }
        } else {
            t.lines_of(l.base, min_shift, &mut lines);
            let life = last - l.alloc_ns;
            for round in 0..m.rounds {
                let cpu = rng
                    .weighted(m.cpus.iter().map(|c| c.1))
                    .and_then(|i| m.cpus.get(i))
                    .map_or(l.alloc_cpu, |c| c.0);
                let since = u128::from(life) * u128::from(round) / u128::from(m.rounds);
                let time = at(since as u64);
                events.extend(lines.iter().map(|&line| Event {
                    time,
                    addr: line << min_shift,
                    object,
                    cpu,
                }));
            }
        }
        if let Some(end) = l.end_ns {
            events.push(Event {
                time: end,
                addr: 0,
                object,
                cpu: FREE,
            });
        }
    }
    // Stable: an object's accesses at one time stay in path order, before its free.
    events.sort_by_key(|e| e.time);
    events
}

/// Replays `events` through `caches`, summing each simulated type's resident lines per level
/// at every point of the live series.
fn run(
    recorded: &Recorded,
    layout: &Layout,
    events: &[Event],
    simulated_per_type: &[u64],
    min_shift: u32,
    caches: &mut Hierarchy,
    stats: &mut SimulationStats,
) -> Vec<Vec<u64>> {
    let levels = caches.levels();
    let mut sums = vec![vec![0u64; levels]; layout.types.len()];
    let simulated: Vec<usize> = (0..layout.types.len())
        .filter(|&ti| simulated_per_type[ti] > 0)
        .collect();
    let mut snapshot = |caches: &Hierarchy| {
        for &ti in &simulated {
            for (level, sum) in sums[ti].iter_mut().enumerate() {
                *sum += caches.resident(level, ti as u32);
            }
        }
    };
    let mut next_point = 0;
    let mut lines = Vec::new();
    for e in events {
        while layout.times.get(next_point).is_some_and(|&p| p < e.time) {
            snapshot(caches);
            next_point += 1;
        }
        let Some(ti) = layout.type_of_object(recorded, e.object) else {
            continue;
        };
        if e.cpu == FREE {
            if let (Some(l), Some(t)) = (
                recorded.lifetimes.get(e.object as usize),
                layout.types.get(ti),
            ) {
                t.lines_of(l.base, min_shift, &mut lines);
                for line in &mut lines {
                    *line <<= min_shift;
                }
                caches.free(e.object, &lines);
            }
        } else {
            stats.accesses += 1;
            caches.access(e.cpu, e.addr, e.object, ti as u32);
        }
    }
    while next_point < layout.times.len() {
        snapshot(caches);
        next_point += 1;
    }
    sums
}

/// Mean resident lines from the sums over `points` snapshots, scaled by each type's share
/// simulated, then capped, all types together, at what each level holds (`capacities`, in
/// lines).
fn scaled_means(
    sums: &[Vec<u64>],
    points: usize,
    eligible_per_type: &[u64],
    simulated_per_type: &[u64],
    capacities: &[f64],
) -> Vec<Vec<f64>> {
    let points = points.max(1) as f64;
    let mut means: Vec<Vec<f64>> = sums
        .iter()
        .enumerate()
        .map(|(ti, per_level)| {
            let scale = if simulated_per_type[ti] == 0 {
                0.0
            } else {
                eligible_per_type[ti] as f64 / simulated_per_type[ti] as f64
            };
            per_level
                .iter()
                .map(|&s| s as f64 / points * scale)
                .collect()
        })
        .collect();
    for (level, &capacity) in capacities.iter().enumerate() {
        let total: f64 = means.iter().map(|m| m[level]).sum();
        if total > capacity && total > 0.0 {
            for m in &mut means {
                m[level] *= capacity / total;
            }
        }
    }
    means
}
