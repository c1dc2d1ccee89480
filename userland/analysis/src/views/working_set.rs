//! The working-set view (paper section 3.2): live objects and bytes of each slab type over
//! time, exact from the address set; the average number of each type's lines each cache level
//! holds, from a simulation; and per type and level the histogram of distinct lines per
//! associativity set, with the sets flagged as conflicted (see [`super::layout`]); and per
//! level the types each set holds (see [`super::by_set`]).

use super::layout::Layout;
use super::recorded::{Recorded, ViewOptions};
use crate::cache::CacheModel;
use crate::resolve::SymbolSource;
use dprof_model::working_set::{LevelSets, ResidentLines, TypeWorkingSet, WorkingSetReport};
use dprof_model::Report;

/// The working-set section.
pub(super) fn report(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    model: &CacheModel,
    options: &ViewOptions,
    symbols: &dyn SymbolSource,
) -> WorkingSetReport {
    let (resident, simulation) =
        super::simulate::simulate(report, recorded, layout, model, options);
    let types = layout
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let sweep = layout.live.sweep(&t.name, layout.span);
            TypeWorkingSet {
                name: t.name.clone(),
                live_objects: layout
                    .times
                    .iter()
                    .map(|&at| layout.live.live_objects(&t.name, at))
                    .collect(),
                live_bytes: layout
                    .times
                    .iter()
                    .map(|&at| layout.live.live_bytes(&t.name, at))
                    .collect(),
                peak_objects: sweep.peak_objects,
                mean_objects: sweep.mean_objects,
                peak_bytes: sweep.peak_bytes,
                mean_bytes: sweep.mean_bytes,
                peak_time_ns: t.peak_ns,
                touched_ranges: t.touched.iter().map(|&(s, e)| [s, e]).collect(),
                resident_lines: if t.levels.is_empty() {
                    Vec::new()
                } else {
                    model
                        .levels
                        .iter()
                        .zip(resident.get(i).map_or(&[][..], Vec::as_slice))
                        .map(|(level, &mean_lines)| ResidentLines {
                            level: level.name.clone(),
                            mean_lines,
                        })
                        .collect()
                },
                histograms: t.levels.iter().map(|l| l.histogram.clone()).collect(),
            }
        })
        .collect();
    let mut notes = super::notes::common_notes(model);
    notes.push(
        "types that no sample or history touched have no known lines: they are not simulated \
         nor counted in histograms, though they take cache space"
            .to_owned(),
    );
    notes.push(format!(
        "the simulation: every level an LRU cache (one per CPU list sharing it) seeing every \
         access of its CPUs; each object's lines leave at its free; objects with path traces \
         follow a path drawn by frequency (its offsets, CPU changes and times since \
         allocation), the others touch their type's sampled offsets in rounds spread over \
         their lifetime on CPUs drawn from the type's samples; seed {:#x}",
        options.seed
    ));
    if simulation.objects < simulation.eligible_objects {
        notes.push(format!(
            "{} of {} objects simulated (--sim-objects), in caches with 1/{} of each level's \
             sets: resident lines are scaled up by each type's share simulated",
            simulation.objects,
            simulation.eligible_objects,
            (1.0 / simulation.sets_fraction).round()
        ));
    }
    let by_set = super::by_set::report(report, recorded, layout, model, symbols);
    if !by_set.is_empty() {
        notes.push(by_set_note(report, &by_set));
    }
    WorkingSetReport {
        by_set,
        geometry: model.levels.clone(),
        notes,
        times_ns: layout.times.clone(),
        types,
        simulation,
    }
}

/// What the sets' paths are, and how many sets each level listed.
fn by_set_note(report: &Report, by_set: &[LevelSets]) -> String {
    let lines = "by set: a set holds the touched lines of the objects live at the level's peak \
                 (from the address set, as the histograms), not what the LRU simulation kept";
    let paths = if report
        .histories
        .as_ref()
        .is_some_and(|h| !h.types.is_empty())
    {
        "objects arrive through their allocation sites (exact); a site's paths are the path \
         traces of its type's watched objects allocated there, not those of the set's own \
         objects"
    } else {
        "the profile has no object access histories, so the objects' paths are their \
         allocation sites only (collect --histories for the functions they pass through)"
    };
    let left_out: Vec<String> = by_set
        .iter()
        .filter(|l| l.sets_left_out > 0)
        .map(|l| format!("{} {}", l.level, l.sets_left_out))
        .collect();
    if left_out.is_empty() {
        format!("{lines}; {paths}")
    } else {
        format!(
            "{lines}; {paths}; the least busy occupied sets are left out beyond {} per level: {}",
            super::by_set::MAX_SETS_LISTED,
            left_out.join(", ")
        )
    }
}
