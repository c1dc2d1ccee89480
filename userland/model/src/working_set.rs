//! The working-set view in the report (paper section 3.2): live objects and bytes of each
//! slab type over time, the lines each cache level holds of it, and per level the histogram of
//! distinct lines per associativity set.

use serde::{Deserialize, Serialize};

use crate::cache::CacheLevel;

/// The working-set section of a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkingSetReport {
    /// The cache levels used.
    pub geometry: Vec<CacheLevel>,
    /// What the view could not see, one sentence each.
    pub notes: Vec<String>,
    /// The times of the live-object series: evenly spaced over the profile, both ends
    /// included (ns, the records' clock: `CLOCK_MONOTONIC`).
    pub times_ns: Vec<u64>,
    /// Slab types with objects in the address set, in data-profile order.
    pub types: Vec<TypeWorkingSet>,
    /// What the cache simulation did.
    pub simulation: SimulationStats,
}

impl WorkingSetReport {
    /// The type named `name`.
    #[must_use]
    pub fn find_type(&self, name: &str) -> Option<&TypeWorkingSet> {
        self.types.iter().find(|t| t.name == name)
    }
}

/// One type's working set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeWorkingSet {
    /// As the data profile names it.
    pub name: String,
    /// Live objects at each of [`WorkingSetReport::times_ns`].
    pub live_objects: Vec<u64>,
    /// Live bytes (as allocated) at each of them.
    pub live_bytes: Vec<u64>,
    /// Most objects live at once.
    pub peak_objects: u64,
    /// Mean live objects over the profile, weighted by time.
    pub mean_objects: f64,
    /// Most bytes live at once.
    pub peak_bytes: u64,
    /// Mean live bytes, weighted by time.
    pub mean_bytes: f64,
    /// When it first had `peak_objects` live (ns): the moment the histograms show.
    #[serde(default)]
    pub peak_time_ns: u64,
    /// Byte ranges of its objects that its samples and histories touched (`[start, end)`):
    /// the lines simulated and counted in the histograms.
    #[serde(default)]
    pub touched_ranges: Vec<[u32; 2]>,
    /// Mean lines held per level, from the simulation; empty when no sample or history
    /// touched the type, or without geometry.
    pub resident_lines: Vec<ResidentLines>,
    /// Distinct lines per set per level at the peak; empty as `resident_lines`.
    pub histograms: Vec<SetHistogram>,
}

/// Lines of a type a level holds, on average over the profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResidentLines {
    /// The level.
    pub level: String,
    /// Lines, all caches of the level together, scaled up when only some of the type's
    /// objects were simulated.
    pub mean_lines: f64,
}

/// Distinct lines of one type per associativity set of one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetHistogram {
    /// The level.
    pub level: String,
    /// Its sets.
    pub sets: u64,
    /// Its ways.
    pub ways: u32,
    /// Distinct lines / sets.
    pub mean_lines_per_set: f64,
    /// The most lines in one set.
    pub max_lines_per_set: u64,
    /// How many sets hold each number of lines (0 included), fewest lines first; the sets add
    /// up to `sets`.
    pub lines_per_set: Vec<LinesPerSet>,
    /// Sets holding more than `ways` lines and at least twice the mean: conflicted.
    pub flagged_sets: Vec<u64>,
}

impl SetHistogram {
    /// Whether a set holding `lines` of the type is conflicted (see [`is_conflicted`]).
    #[must_use]
    pub fn conflicted(&self, lines: u64) -> bool {
        is_conflicted(lines, self.ways, self.mean_lines_per_set)
    }
}

/// The paper's conflict rule: a set holding `lines` of a type is conflicted when they are
/// more than the `ways` it has and at least [`CONFLICT_FACTOR`] times the type's `mean` lines
/// per set.
#[must_use]
pub fn is_conflicted(lines: u64, ways: u32, mean: f64) -> bool {
    lines > u64::from(ways) && lines as f64 >= CONFLICT_FACTOR * mean
}

/// How many times its mean lines per set a type's set must hold to be conflicted.
pub const CONFLICT_FACTOR: f64 = 2.0;

/// A bucket of a [`SetHistogram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinesPerSet {
    /// Lines per set.
    pub lines: u64,
    /// Sets holding that many.
    pub sets: u64,
}

/// What the cache simulation did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimulationStats {
    /// Objects simulated.
    pub objects: u64,
    /// Accesses simulated.
    pub accesses: u64,
    /// Seconds it took (making the accesses and simulating them).
    pub seconds: f64,
    /// `accesses / seconds`.
    pub accesses_per_second: f64,
    /// Objects it could have simulated (of types whose touched ranges are known): more than
    /// `objects` when `--sim-objects` capped them.
    #[serde(default)]
    pub eligible_objects: u64,
    /// Objects whose accesses came from path traces (the others from sampled offsets).
    #[serde(default)]
    pub objects_from_paths: u64,
    /// The share of each level's sets simulated: 1, or the share of objects simulated when
    /// `--sim-objects` capped them (a power of two, see `objects`).
    #[serde(default)]
    pub sets_fraction: f64,
    /// The seed of its random choices.
    #[serde(default)]
    pub seed: u64,
}
