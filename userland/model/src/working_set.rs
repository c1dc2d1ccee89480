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
    /// Per level, which types' lines each associativity set holds at the level's peak, and
    /// from where the objects came; empty without geometry.
    #[serde(default)]
    pub by_set: Vec<LevelSets>,
}

impl WorkingSetReport {
    /// The type named `name`.
    #[must_use]
    pub fn find_type(&self, name: &str) -> Option<&TypeWorkingSet> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The sets of the level named `level`.
    #[must_use]
    pub fn level_sets(&self, level: &str) -> Option<&LevelSets> {
        self.by_set.iter().find(|l| l.level == level)
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

/// One level's associativity sets by the types whose lines they hold (paper section 3.2: "which
/// types an associativity set holds and the number of distinct instances of each"), at the
/// level's peak: the moment the live objects of every type with known lines touched the most
/// lines together. A type's lines are those its samples and histories touched (see
/// [`TypeWorkingSet::touched_ranges`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelSets {
    /// The level.
    pub level: String,
    /// Its sets.
    pub sets: u64,
    /// Its ways.
    pub ways: u32,
    /// The level's peak (ns).
    pub peak_time_ns: u64,
    /// Distinct lines of all types at the peak.
    pub lines: u64,
    /// `lines / sets`.
    pub mean_lines_per_set: f64,
    /// Sets holding at least one line.
    pub occupied_sets: u64,
    /// Sets holding more lines than `ways` and at least twice the mean, all types together
    /// ([`is_conflicted`]); all of them are counted, listed or not.
    pub conflicted_sets: u64,
    /// Occupied sets, conflicted first, then those a type's own histogram flags
    /// ([`SetType::flagged`]), then by lines (most first), then by index; at most a bounded
    /// number, the rest counted in `sets_left_out`.
    pub occupied: Vec<SetOccupants>,
    /// Occupied sets not in `occupied` (the least busy).
    pub sets_left_out: u64,
}

/// One associativity set at its level's peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetOccupants {
    /// The set's index.
    pub set: u64,
    /// Distinct lines in it, all types together.
    pub lines: u64,
    /// Whether it is conflicted (see [`LevelSets::conflicted_sets`]).
    pub conflicted: bool,
    /// The types with lines in it, most lines first, then by name.
    pub types: Vec<SetType>,
}

/// One type's share of a set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetType {
    /// As the data profile names it.
    pub name: String,
    /// Distinct objects of the type with a line in the set.
    pub objects: u64,
    /// Distinct lines of the type in the set.
    pub lines: u64,
    /// Whether the type's own histogram flags the set (its lines alone, at its own peak:
    /// [`SetHistogram::flagged_sets`]), whether or not the set is conflicted for all types.
    #[serde(default)]
    pub flagged: bool,
    /// Where those objects were allocated, most objects first, then by function.
    pub sites: Vec<ArrivalSite>,
}

/// The allocation site through which some of a set's objects arrived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrivalSite {
    /// The function of the allocation's call site (an address when no symbol names it).
    pub function: String,
    /// Objects of the type in the set allocated there.
    pub objects: u64,
    /// The type's path traces (indices into its [`crate::histories::TypeHistories::paths`])
    /// that start with an allocation in this function, most frequent first: the paths that
    /// watched objects from this site took, not necessarily these objects' own. Empty when
    /// the profile has no such history.
    pub paths: Vec<usize>,
}
