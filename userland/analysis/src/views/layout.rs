//! Where each type's lines fall: for every live object of a type, the lines of the object
//! that the type's accesses touch (the offsets its samples and history ranges name, not the
//! whole object: page-sized objects whose accesses all hit offset 0 use few sets, as they do
//! on hardware), counted per associativity set of each level at the type's peak, the moment
//! it had the most live objects. The peak is the most the cache had to hold of the type at
//! once; an average over the profile would dilute bursts with idle time.
//!
//! From these counts: a set is flagged for a type at a level when the type's distinct lines
//! in it exceed the level's ways and are at least twice the type's mean over all sets of the
//! level (the paper's rule); the working set of a level is the most lines of all sampled
//! types live at once, in bytes.

use rustc_hash::FxHashMap;

use super::live::LiveIndex;
use super::recorded::{index_by_name, Lifetime, Recorded};
use crate::cache::CacheModel;
use crate::histories::Histories;
use dprof_model::cache::CacheLevel;
use dprof_model::working_set::{is_conflicted, LinesPerSet, SetHistogram};
use dprof_model::{Report, TypeKind};

/// One type's lines at one level, at the type's peak.
#[derive(Clone, Debug)]
pub(super) struct TypeLevel {
    /// The report's histogram.
    pub(super) histogram: SetHistogram,
    /// Sets holding at least one line / sets.
    pub(super) covered_fraction: f64,
    /// Distinct lines in the flagged sets.
    pub(super) lines_in_flagged_sets: u64,
}

impl TypeLevel {
    /// Whether `set` is flagged.
    pub(super) fn is_flagged(&self, set: u64) -> bool {
        self.histogram.flagged_sets.binary_search(&set).is_ok()
    }
}

/// One slab type with objects in the address set.
#[derive(Clone, Debug)]
pub(super) struct TypeLayout {
    /// As the data profile names it.
    pub(super) name: String,
    /// Byte ranges `[start, end)` of the object its samples and histories touch, sorted and
    /// merged; empty when neither touched it.
    pub(super) touched: Vec<(u32, u32)>,
    /// Its lifetimes (indices into [`Recorded::lifetimes`]).
    pub(super) objects: Vec<u32>,
    /// The first time it had the most live objects.
    pub(super) peak_ns: u64,
    /// Per level of the model, in order; empty without touched ranges.
    pub(super) levels: Vec<TypeLevel>,
}

impl TypeLayout {
    /// The line numbers (at `line_shift`) an object at `base` touches, ascending, distinct.
    pub(super) fn lines_of(&self, base: u64, line_shift: u32, out: &mut Vec<u64>) {
        out.clear();
        for &(start, end) in &self.touched {
            let first = base.wrapping_add(u64::from(start)) >> line_shift;
            let last = base.wrapping_add(u64::from(end.max(start + 1) - 1)) >> line_shift;
            for line in first..=last {
                if out.last() != Some(&line) {
                    out.push(line);
                }
            }
        }
    }
}

/// The working set of one level: the most lines of all sampled types live at once.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LevelPeak {
    /// In bytes.
    pub(super) bytes: u64,
    /// When it was first reached (ns).
    pub(super) time_ns: u64,
}

/// Every slab type's lines, and what both views derive from them.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    /// Profile start and end (ns).
    pub(super) span: (u64, u64),
    /// The live-object series' points.
    pub(super) times: Vec<u64>,
    /// Exact live counts.
    pub(super) live: LiveIndex,
    /// Slab types with objects, in data-profile order, then those only allocated.
    pub(super) types: Vec<TypeLayout>,
    /// Recorded type id to index in `types`.
    pub(super) by_type_id: FxHashMap<u32, usize>,
    /// Per level of the model.
    pub(super) working_set: Vec<LevelPeak>,
}

impl Layout {
    pub(super) fn new(
        report: &Report,
        recorded: &Recorded,
        histories: Option<&Histories>,
        model: &CacheModel,
        time_points: usize,
    ) -> Self {
        let span = recorded.span.unwrap_or((0, 0));
        let live = LiveIndex::from_recorded(recorded);
        let mut objects_of: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for (i, l) in recorded.lifetimes.iter().enumerate() {
            objects_of.entry(l.type_id).or_default().push(i as u32);
        }
        let ids = index_by_name(&recorded.type_names);
        let mut ranges: FxHashMap<&str, Vec<(u32, u32)>> = FxHashMap::default();
        for h in histories.map_or(&[][..], |h| h.histories.as_slice()) {
            let list = ranges.entry(h.type_name.as_str()).or_default();
            for r in &h.ranges {
                list.push((r.offset, r.offset.saturating_add(r.len.max(1))));
            }
        }
        let mut types = Vec::new();
        let mut by_type_id = FxHashMap::default();
        let layout_of = |name: String, touched: Vec<(u32, u32)>, objects: Vec<u32>| {
            let peak_ns = live.peak_time(&name).unwrap_or(span.0);
            let mut layout = TypeLayout {
                name,
                touched: merge(touched),
                objects,
                peak_ns,
                levels: Vec::new(),
            };
            if !layout.touched.is_empty() {
                layout.levels = model
                    .levels
                    .iter()
                    .map(|level| type_level(&layout, &recorded.lifetimes, level))
                    .collect();
            }
            layout
        };
        for t in &report.data_profile.types {
            if t.kind != TypeKind::Slab {
                continue;
            }
            let Some(&id) = ids.get(t.name.as_str()) else {
                continue;
            };
            let Some(objects) = objects_of.remove(&(id as u32)) else {
                continue;
            };
            let touched: Vec<(u32, u32)> = t
                .fields
                .iter()
                .map(|f| {
                    let start = u32::try_from(f.offset).unwrap_or(u32::MAX - 1);
                    (start, start.saturating_add(f.size.max(1)))
                })
                .chain(ranges.remove(t.name.as_str()).unwrap_or_default())
                .collect();
            by_type_id.insert(id as u32, types.len());
            types.push(layout_of(t.name.clone(), touched, objects));
        }
        // Types only allocated are not in the data profile; their live objects are still
        // the working set's: after the sampled ones, by peak live bytes, then name. History
        // ranges are the only lines they are known to touch.
        let mut unsampled: Vec<(u64, &String, u32, Vec<u32>)> = objects_of
            .into_iter()
            .filter_map(|(id, objects)| {
                let name = recorded.type_names.get(id as usize)?;
                Some((live.sweep(name, span).peak_bytes, name, id, objects))
            })
            .collect();
        unsampled.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        for (_, name, id, objects) in unsampled {
            let touched = ranges.remove(name.as_str()).unwrap_or_default();
            by_type_id.insert(id, types.len());
            types.push(layout_of(name.clone(), touched, objects));
        }
        let working_set = model
            .levels
            .iter()
            .map(|level| level_peak(&types, &recorded.lifetimes, level))
            .collect();
        Self {
            span,
            times: time_grid(span, time_points),
            live,
            types,
            by_type_id,
            working_set,
        }
    }

    /// The layout of the type of lifetime `object`.
    pub(super) fn type_of_object(&self, recorded: &Recorded, object: u32) -> Option<usize> {
        let l = recorded.lifetimes.get(object as usize)?;
        self.by_type_id.get(&l.type_id).copied()
    }
}

/// `n` evenly spaced times from the start to the end of `span`, both included.
pub(super) fn time_grid((start, end): (u64, u64), n: usize) -> Vec<u64> {
    let n = n.max(2);
    let width = u128::from(end.saturating_sub(start));
    (0..n)
        .map(|i| start + (width * i as u128 / (n as u128 - 1)) as u64)
        .collect()
}

/// Sorted, overlapping and adjacent ranges merged.
fn merge(mut ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    ranges.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The type's distinct lines per set of `level` among its objects live at its peak.
fn type_level(t: &TypeLayout, lifetimes: &[Lifetime], level: &CacheLevel) -> TypeLevel {
    let shift = level.line_shift();
    let mut lines: Vec<u64> = Vec::new();
    let mut one: Vec<u64> = Vec::new();
    for &i in &t.objects {
        let Some(l) = lifetimes.get(i as usize) else {
            continue;
        };
        if l.live_at(t.peak_ns) {
            t.lines_of(l.base, shift, &mut one);
            lines.extend_from_slice(&one);
        }
    }
    lines.sort_unstable();
    lines.dedup();
    let mut per_set: FxHashMap<u64, u64> = FxHashMap::default();
    for &line in &lines {
        *per_set.entry(level.set_of_line(line)).or_default() += 1;
    }
    histogram(level, lines.len() as u64, &per_set)
}

/// The histogram and flags of `total` distinct lines spread as `per_set` over `level`.
pub(super) fn histogram(
    level: &CacheLevel,
    total: u64,
    per_set: &FxHashMap<u64, u64>,
) -> TypeLevel {
    let mean = total as f64 / level.sets as f64;
    let mut buckets: FxHashMap<u64, u64> = FxHashMap::default();
    let mut flagged: Vec<u64> = Vec::new();
    let mut in_flagged = 0;
    for (&set, &n) in per_set {
        *buckets.entry(n).or_default() += 1;
        if is_conflicted(n, level.ways, mean) {
            flagged.push(set);
            in_flagged += n;
        }
    }
    let empty_sets = level.sets - per_set.len() as u64;
    if empty_sets > 0 {
        buckets.insert(0, empty_sets);
    }
    let mut lines_per_set: Vec<LinesPerSet> = buckets
        .into_iter()
        .map(|(lines, sets)| LinesPerSet { lines, sets })
        .collect();
    lines_per_set.sort_by_key(|b| b.lines);
    flagged.sort_unstable();
    TypeLevel {
        histogram: SetHistogram {
            level: level.name.clone(),
            sets: level.sets,
            ways: level.ways,
            mean_lines_per_set: mean,
            max_lines_per_set: per_set.values().copied().max().unwrap_or(0),
            lines_per_set,
            flagged_sets: flagged,
        },
        covered_fraction: per_set.len() as f64 / level.sets as f64,
        lines_in_flagged_sets: in_flagged,
    }
}

/// The most bytes of lines that the sampled types' live objects touch at once.
fn level_peak(types: &[TypeLayout], lifetimes: &[Lifetime], level: &CacheLevel) -> LevelPeak {
    let shift = level.line_shift();
    let line_bytes = u64::from(level.line_bytes);
    // (time, is_alloc, lines): ends first at equal times, as lifetimes end exclusive.
    let mut events: Vec<(u64, bool, u64)> = Vec::new();
    let mut one = Vec::new();
    for t in types.iter().filter(|t| !t.touched.is_empty()) {
        // Lines per object depend only on the base's offset in its line.
        let mut by_alignment: FxHashMap<u64, u64> = FxHashMap::default();
        for &i in &t.objects {
            let Some(l) = lifetimes.get(i as usize) else {
                continue;
            };
            let n = *by_alignment
                .entry(l.base & (line_bytes - 1))
                .or_insert_with(|| {
                    t.lines_of(l.base, shift, &mut one);
                    one.len() as u64
                });
            events.push((l.alloc_ns, true, n));
            if let Some(end) = l.end_ns {
                events.push((end, false, n));
            }
        }
    }
    events.sort_unstable_by_key(|&(t, alloc, _)| (t, alloc));
    let (mut now, mut peak, mut time_ns) = (0u64, 0u64, 0u64);
    for (at, alloc, n) in events {
        if alloc {
            now += n;
            if now > peak {
                peak = now;
                time_ns = at;
            }
        } else {
            now = now.saturating_sub(n);
        }
    }
    LevelPeak {
        bytes: peak * line_bytes,
        time_ns,
    }
}
