//! The working set by associativity set (paper section 3.2): at each level's peak, the moment
//! the live objects of every type with known lines touched the most lines together
//! ([`super::layout::LevelPeak`]), which types' lines each set holds, how many distinct
//! objects of each, and the allocation sites those objects came from, each with the path
//! traces of the type that start there.
//!
//! A set is conflicted by the paper's rule applied to all types together: more lines than
//! ways, and at least twice the level's mean lines per set. The per-type flags of the
//! histograms apply the rule to one type at its own peak; a set can be one and not the other
//! (a type crowding a few sets while another fills every set evenly), so each type in a set
//! also says whether its own histogram flags the set, and such sets come next after the
//! conflicted ones.
//!
//! "Path" here is what the profile can back: every object's allocation site is recorded, so
//! the sites are exact for the very objects in the set; which functions an object then passes
//! through is known only for the few objects that histories watched, so a site's paths are
//! the type's path traces allocated there, not the paths of these objects.

use rustc_hash::FxHashMap;

use super::layout::Layout;
use super::recorded::Recorded;
use crate::cache::CacheModel;
use crate::resolve::{function_of, SymbolSource};
use dprof_model::cache::CacheLevel;
use dprof_model::working_set::{is_conflicted, ArrivalSite, LevelSets, SetOccupants, SetType};
use dprof_model::Report;

/// Sets listed per level at most: every conflicted set first, then the busiest others. A
/// level of the largest caches has tens of thousands of occupied sets, which no one reads one
/// by one.
pub const MAX_SETS_LISTED: usize = 256;

/// One touched line of one live object at the level's peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    set: u64,
    /// Index in [`Layout::types`].
    type_index: usize,
    /// Index in [`Recorded::lifetimes`].
    object: u32,
    line: u64,
}

/// A level of the model, its index, and its peak.
struct LevelAt<'m> {
    level: &'m CacheLevel,
    index: usize,
    peak_time_ns: u64,
}

/// Every level's sets.
pub(super) fn report(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    model: &CacheModel,
    symbols: &dyn SymbolSource,
) -> Vec<LevelSets> {
    let mut site_names: FxHashMap<u64, String> = FxHashMap::default();
    model
        .levels
        .iter()
        .zip(&layout.working_set)
        .enumerate()
        .map(|(level_index, (level, peak))| {
            let placed = placed_lines(recorded, layout, level, peak.time_ns);
            let at = LevelAt {
                level,
                index: level_index,
                peak_time_ns: peak.time_ns,
            };
            level_sets(report, recorded, layout, &at, &placed, &mut |site| {
                site_names
                    .entry(site)
                    .or_insert_with(|| function_of(symbols, site).0)
                    .clone()
            })
        })
        .collect()
}

/// The touched lines of every object live at `at`, sorted by set, type, object and line.
fn placed_lines(recorded: &Recorded, layout: &Layout, level: &CacheLevel, at: u64) -> Vec<Placed> {
    let shift = level.line_shift();
    let mut placed = Vec::new();
    let mut lines = Vec::new();
    for (type_index, t) in layout.types.iter().enumerate() {
        if t.touched.is_empty() {
            continue;
        }
        for &object in &t.objects {
            let Some(l) = recorded.lifetimes.get(object as usize) else {
                continue;
            };
            if !l.live_at(at) {
                continue;
            }
            t.lines_of(l.base, shift, &mut lines);
            placed.extend(lines.iter().map(|&line| Placed {
                set: level.set_of_line(line),
                type_index,
                object,
                line,
            }));
        }
    }
    placed.sort_unstable();
    placed
}

/// Distinct values of `values`.
fn distinct(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.dedup();
    values.len() as u64
}

fn level_sets(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    at: &LevelAt<'_>,
    placed: &[Placed],
    site_name: &mut dyn FnMut(u64) -> String,
) -> LevelSets {
    let level = at.level;
    // Whether a type's own histogram flags `set`.
    let flagged_for = |type_index: usize, set: u64| {
        layout
            .types
            .get(type_index)
            .and_then(|t| t.levels.get(at.index))
            .is_some_and(|l| l.is_flagged(set))
    };
    // (set, distinct lines, its entries in `placed`).
    let groups: Vec<(u64, u64, &[Placed])> = placed
        .chunk_by(|a, b| a.set == b.set)
        .filter_map(|group| {
            let first = group.first()?;
            let lines = distinct(group.iter().map(|p| p.line).collect());
            Some((first.set, lines, group))
        })
        .collect();
    let lines: u64 = groups.iter().map(|g| g.1).sum();
    let mean = lines as f64 / level.sets as f64;
    let mut ranked: Vec<Ranked<'_>> = groups
        .into_iter()
        .map(|(set, lines, group)| Ranked {
            conflicted: is_conflicted(lines, level.ways, mean),
            flagged: group.iter().any(|p| flagged_for(p.type_index, set)),
            lines,
            set,
            group,
        })
        .collect();
    ranked.sort_by(|a, b| {
        (b.conflicted, b.flagged, b.lines)
            .cmp(&(a.conflicted, a.flagged, a.lines))
            .then(a.set.cmp(&b.set))
    });
    let conflicted_sets = ranked.iter().filter(|r| r.conflicted).count() as u64;
    let occupied_sets = ranked.len() as u64;
    let occupied = ranked
        .iter()
        .take(MAX_SETS_LISTED)
        .map(|r| SetOccupants {
            set: r.set,
            lines: r.lines,
            conflicted: r.conflicted,
            types: set_types(report, recorded, layout, r.group, site_name, &|t| {
                flagged_for(t, r.set)
            }),
        })
        .collect::<Vec<_>>();
    LevelSets {
        level: level.name.clone(),
        sets: level.sets,
        ways: level.ways,
        peak_time_ns: at.peak_time_ns,
        lines,
        mean_lines_per_set: mean,
        occupied_sets,
        conflicted_sets,
        sets_left_out: occupied_sets - occupied.len() as u64,
        occupied,
    }
}

/// An occupied set, as it is ranked.
struct Ranked<'p> {
    conflicted: bool,
    /// A type's own histogram flags it.
    flagged: bool,
    lines: u64,
    set: u64,
    /// Its entries in the level's [`Placed`] lines.
    group: &'p [Placed],
}

/// The types of one set's entries (sorted by type, object, line); `flagged(type_index)`:
/// whether the type's own histogram flags the set.
fn set_types(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    group: &[Placed],
    site_name: &mut dyn FnMut(u64) -> String,
    flagged: &dyn Fn(usize) -> bool,
) -> Vec<SetType> {
    let mut types: Vec<SetType> = group
        .chunk_by(|a, b| a.type_index == b.type_index)
        .filter_map(|of_type| {
            let type_index = of_type.first()?.type_index;
            let t = layout.types.get(type_index)?;
            let mut objects: Vec<u32> = of_type.iter().map(|p| p.object).collect();
            objects.dedup();
            let mut by_site: FxHashMap<u64, u64> = FxHashMap::default();
            for &o in &objects {
                if let Some(l) = recorded.lifetimes.get(o as usize) {
                    *by_site.entry(l.call_site).or_default() += 1;
                }
            }
            let paths = report
                .histories
                .as_ref()
                .and_then(|h| h.find_type(&t.name))
                .map_or(&[][..], |h| h.paths.as_slice());
            let mut sites: Vec<ArrivalSite> = by_site
                .into_iter()
                .map(|(site, objects)| {
                    let function = site_name(site);
                    ArrivalSite {
                        paths: paths
                            .iter()
                            .enumerate()
                            .filter(|(_, p)| p.alloc_function == function)
                            .map(|(i, _)| i)
                            .collect(),
                        function,
                        objects,
                    }
                })
                .collect();
            sites.sort_by(|a, b| {
                b.objects
                    .cmp(&a.objects)
                    .then_with(|| a.function.cmp(&b.function))
            });
            Some(SetType {
                name: t.name.clone(),
                objects: objects.len() as u64,
                lines: distinct(of_type.iter().map(|p| p.line).collect()),
                flagged: flagged(type_index),
                sites,
            })
        })
        .collect();
    types.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.name.cmp(&b.name)));
    types
}
