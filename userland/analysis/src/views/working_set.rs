//! The working-set view (paper section 3.2): live objects and bytes of each slab type over
//! time, exact from the address set; the average number of each type's lines each cache level
//! holds, from a simulation; and per type and level the histogram of distinct lines per
//! associativity set, with the sets flagged as conflicted (see [`super::layout`]).

use rustc_hash::FxHashMap;

use super::layout::Layout;
use super::{Recorded, ViewOptions};
use crate::cache::CacheModel;
use dprof_model::working_set::ResidentLines;
use dprof_model::working_set::TypeWorkingSet;
use dprof_model::working_set::WorkingSetReport;
use dprof_model::Report;

/// Exact live objects and bytes of each type at any time, from the address set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveIndex {
    types: FxHashMap<String, TypeLive>,
}

/// One type's allocation and end times, sorted, with running byte sums.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TypeLive {
    allocs: Vec<u64>,
    alloc_bytes: Vec<u64>,
    ends: Vec<u64>,
    end_bytes: Vec<u64>,
}

/// Sorted times and the running sum of their sizes.
fn sorted_with_sums(mut items: Vec<(u64, u64)>) -> (Vec<u64>, Vec<u64>) {
    items.sort_unstable();
    let mut sum = 0u64;
    items
        .into_iter()
        .map(|(t, bytes)| {
            sum += bytes;
            (t, sum)
        })
        .unzip()
}

/// How many of `sorted` are at most `t`.
fn at_most(sorted: &[u64], t: u64) -> usize {
    sorted.partition_point(|&x| x <= t)
}

impl TypeLive {
    fn objects_at(&self, t: u64) -> u64 {
        (at_most(&self.allocs, t) - at_most(&self.ends, t).min(at_most(&self.allocs, t))) as u64
    }

    fn bytes_at(&self, t: u64) -> u64 {
        let sum = |sums: &[u64], n: usize| n.checked_sub(1).map_or(0, |i| sums[i]);
        sum(&self.alloc_bytes, at_most(&self.allocs, t))
            .saturating_sub(sum(&self.end_bytes, at_most(&self.ends, t)))
    }

    /// Peak objects and when first reached, peak bytes, and time-weighted means over
    /// `[start, end]`: a sweep over allocations and ends (ends first at equal times).
    fn sweep(&self, (start, end): (u64, u64)) -> Sweep {
        let (mut i, mut j) = (0, 0);
        let mut objects = 0u64;
        let mut bytes = 0u64;
        let mut out = Sweep {
            peak_time: start,
            ..Sweep::default()
        };
        let mut last = start;
        let (mut object_ns, mut byte_ns) = (0u128, 0u128);
        let mut advance = |to: u64, objects: u64, bytes: u64| {
            let to = to.clamp(start, end);
            let dt = u128::from(to.saturating_sub(last));
            object_ns += u128::from(objects) * dt;
            byte_ns += u128::from(bytes) * dt;
            last = last.max(to);
        };
        while i < self.allocs.len() || j < self.ends.len() {
            let next_end = self.ends.get(j).copied().unwrap_or(u64::MAX);
            let next_alloc = self.allocs.get(i).copied().unwrap_or(u64::MAX);
            let t = next_end.min(next_alloc);
            advance(t, objects, bytes);
            // Everything at `t`: ends, then allocations.
            while self.ends.get(j) == Some(&t) {
                objects = objects.saturating_sub(1);
                j += 1;
            }
            while self.allocs.get(i) == Some(&t) {
                objects += 1;
                i += 1;
            }
            let sum = |sums: &[u64], n: usize| n.checked_sub(1).map_or(0, |k| sums[k]);
            bytes = sum(&self.alloc_bytes, i).saturating_sub(sum(&self.end_bytes, j));
            if objects > out.peak_objects {
                out.peak_objects = objects;
                out.peak_time = t;
            }
            out.peak_bytes = out.peak_bytes.max(bytes);
        }
        advance(end, objects, bytes);
        let width = end.saturating_sub(start);
        if width == 0 {
            out.mean_objects = self.objects_at(start) as f64;
            out.mean_bytes = self.bytes_at(start) as f64;
        } else {
            out.mean_objects = object_ns as f64 / width as f64;
            out.mean_bytes = byte_ns as f64 / width as f64;
        }
        out
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Sweep {
    peak_objects: u64,
    peak_time: u64,
    peak_bytes: u64,
    mean_objects: f64,
    mean_bytes: f64,
}

impl LiveIndex {
    /// The index of what the main pass recorded.
    #[must_use]
    pub fn from_recorded(recorded: &Recorded) -> Self {
        // Per type: (time, bytes) of allocations, and of ends.
        type Events = (Vec<(u64, u64)>, Vec<(u64, u64)>);
        let mut allocs: FxHashMap<u32, Events> = FxHashMap::default();
        for l in &recorded.lifetimes {
            let (a, e) = allocs.entry(l.type_id).or_default();
            a.push((l.alloc_ns, u64::from(l.size)));
            if let Some(end) = l.end_ns {
                e.push((end, u64::from(l.size)));
            }
        }
        let types = allocs
            .into_iter()
            .map(|(id, (a, e))| {
                let (allocs, alloc_bytes) = sorted_with_sums(a);
                let (ends, end_bytes) = sorted_with_sums(e);
                (
                    recorded.type_name(id).to_owned(),
                    TypeLive {
                        allocs,
                        alloc_bytes,
                        ends,
                        end_bytes,
                    },
                )
            })
            .collect();
        Self { types }
    }

    /// Objects of type `type_name` live at `t` (ns, the records' clock): allocated at or
    /// before `t` during collection, not ended (freed or replaced) at or before it. Objects
    /// allocated before collection started are not counted.
    #[must_use]
    pub fn live_objects(&self, type_name: &str, t: u64) -> u64 {
        self.types.get(type_name).map_or(0, |l| l.objects_at(t))
    }

    /// Bytes (as allocated) of type `type_name` live at `t`, as [`LiveIndex::live_objects`].
    #[must_use]
    pub fn live_bytes(&self, type_name: &str, t: u64) -> u64 {
        self.types.get(type_name).map_or(0, |l| l.bytes_at(t))
    }

    /// The types with objects, in no particular order.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// When `type_name` first had the most objects live.
    pub(super) fn peak_time(&self, type_name: &str) -> Option<u64> {
        let l = self.types.get(type_name)?;
        let first = l.allocs.first().copied()?;
        Some(l.sweep((first, first)).peak_time)
    }

    fn sweep(&self, type_name: &str, span: (u64, u64)) -> Sweep {
        self.types
            .get(type_name)
            .map_or_else(Sweep::default, |l| l.sweep(span))
    }
}

/// The working-set section.
pub(super) fn report(
    report: &Report,
    recorded: &Recorded,
    layout: &Layout,
    model: &CacheModel,
    options: &ViewOptions,
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
    let mut notes = super::common_notes(model);
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
    WorkingSetReport {
        geometry: model.levels.clone(),
        notes,
        times_ns: layout.times.clone(),
        types,
        simulation,
    }
}
