//! The miss classification (paper section 3.3) and working-set (3.2) views.
//!
//! ```text
//! main pass (analysis) ── with views on, also records ──▶ object lifetimes (address set)
//!                                                         slab samples (object, offset, ip)
//! histories (second pass) ─────────────────────────────▶ history accesses in time order
//!   ──▶ layout: each type's lines (object bases + the offsets its samples and histories touch)
//!        per set and level, at the type's peak ──▶ conflict flags, capacity, histograms
//!   ──▶ working set: live objects over time (exact), cache simulation (resident lines)
//!   ──▶ misses: history accesses classified (true / false sharing, cannot tell), then each
//!        sample: sharing, else conflict, else capacity, else unclassified
//! ```
//!
//! The views are computed only when asked for ([`crate::pipeline::analyze_views`]): the data
//! profile's main pass then also records lifetimes and slab samples (memory grows with
//! allocations and samples, which the data profile alone avoids); without views it pays one
//! untaken branch per event.
//!
//! Every number is reproducible: the simulation draws its objects and paths from a seeded
//! generator ([`ViewOptions::seed`]).

mod layout;
mod misses;
mod simulate;
mod working_set;

#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap;

use crate::cache::{CacheModel, CacheOverride};
use crate::histories::Histories;
use crate::resolve::{LiveObject, SymbolSource};
use dprof_format::{Profile, ProfileError, ProfileHeader};
use dprof_model::AccessKind;
use dprof_model::{Report, Warning, WarningCode};

pub use misses::CAPACITY_COVERAGE;
pub use working_set::LiveIndex;

/// One object of the address set from allocation to free, as the replay saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// Start address.
    pub base: u64,
    /// Bytes allocated.
    pub size: u32,
    /// Its type (an index into [`Recorded::type_names`]).
    pub type_id: u32,
    /// Allocating CPU.
    pub alloc_cpu: u32,
    /// Allocation time (ns).
    pub alloc_ns: u64,
    /// When it ended: freed, or an allocation over it replaced it (its free was missed).
    /// `None`: live at the end of the profile.
    pub end_ns: Option<u64>,
}

impl Lifetime {
    /// Whether it was live at `t`: from its allocation (inclusive) to its end (exclusive).
    #[must_use]
    pub fn live_at(&self, t: u64) -> bool {
        self.alloc_ns <= t && self.end_ns.is_none_or(|e| t < e)
    }

    /// One past its last byte.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.base.saturating_add(u64::from(self.size.max(1)))
    }
}

/// What a hardware sampler said about a sample's access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissBit {
    /// Nothing (the software sampler).
    Unknown,
    /// It hit L1.
    Hit,
    /// It missed L1.
    Miss,
}

/// One access sample that resolved to a slab object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectSample {
    /// The sampled instruction.
    pub ip: u64,
    /// The object: an index into [`Recorded::lifetimes`].
    pub object: u32,
    /// Offset in the object.
    pub offset: u32,
    /// Sampling CPU.
    pub cpu: u32,
    /// Bytes accessed (0: unknown).
    pub size: u16,
    /// Read, write or both.
    pub kind: AccessKind,
    /// What the hardware said.
    pub miss: MissBit,
}

/// What the main pass records for the views (see [`crate::pipeline::Analyzer::record_views`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Every object allocated during collection, in allocation order.
    pub lifetimes: Vec<Lifetime>,
    /// Samples that resolved to one of them.
    pub samples: Vec<ObjectSample>,
    /// Type names, by type id.
    pub type_names: Vec<String>,
    /// Earliest and latest record times.
    pub span: Option<(u64, u64)>,
}

impl Recorded {
    /// Records an allocation; its serial must be the next lifetime's index (the address set
    /// numbers objects in allocation order).
    pub(crate) fn alloc(&mut self, obj: &LiveObject) {
        if obj.serial != self.lifetimes.len() as u64 {
            return;
        }
        self.lifetimes.push(Lifetime {
            base: obj.base,
            size: obj.size,
            type_id: obj.type_id.0,
            alloc_cpu: obj.alloc_cpu,
            alloc_ns: obj.alloc_time_ns,
            end_ns: None,
        });
    }

    /// Records that the object numbered `serial` ended at `time_ns`.
    pub(crate) fn end(&mut self, serial: u64, time_ns: u64) {
        if let Some(l) = usize::try_from(serial)
            .ok()
            .and_then(|i| self.lifetimes.get_mut(i))
        {
            l.end_ns = Some(time_ns.max(l.alloc_ns));
        }
    }

    /// Records a sample at `offset` of `obj`.
    #[allow(clippy::too_many_arguments, reason = "the fields of one sample")]
    pub(crate) fn sample(
        &mut self,
        obj: &LiveObject,
        offset: u64,
        cpu: u32,
        ip: u64,
        size: u16,
        kind: AccessKind,
        miss: MissBit,
    ) {
        let (Ok(object), Ok(offset)) = (u32::try_from(obj.serial), u32::try_from(offset)) else {
            return;
        };
        self.samples.push(ObjectSample {
            ip,
            object,
            offset,
            cpu,
            size,
            kind,
            miss,
        });
    }

    /// The type name of `type_id`.
    #[must_use]
    pub fn type_name(&self, type_id: u32) -> &str {
        self.type_names
            .get(type_id as usize)
            .map_or("?", String::as_str)
    }
}

/// How the views are computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewOptions {
    /// `--cache` levels over the profile's.
    pub overrides: Vec<CacheOverride>,
    /// Points of the live-object series over the profile's time span (at least 2).
    pub time_points: usize,
    /// Objects simulated at most (a seeded random choice when more are eligible).
    pub sim_objects: usize,
    /// Seed of the simulation's random choices.
    pub seed: u64,
}

/// Default [`ViewOptions::time_points`].
pub const DEFAULT_TIME_POINTS: usize = 100;
/// Default [`ViewOptions::sim_objects`]: enough for the answer to settle (see the
/// convergence figures of `dprof-bench --views`) at a few seconds of simulation.
pub const DEFAULT_SIM_OBJECTS: usize = 100_000;

impl Default for ViewOptions {
    fn default() -> Self {
        Self {
            overrides: Vec::new(),
            time_points: DEFAULT_TIME_POINTS,
            sim_objects: DEFAULT_SIM_OBJECTS,
            seed: 0x5eed_d9f0_0000_0001,
        }
    }
}

/// The line size sharing is judged with when the profile gives no geometry.
pub const ASSUMED_LINE_BYTES: u32 = 64;

/// Fills [`Report::misses`] and [`Report::working_set`] from what the main pass recorded and
/// the profile's histories; a warning says when the profile gives no usable cache geometry
/// (the cache-dependent parts are then empty).
pub fn compute(
    report: &mut Report,
    recorded: &Recorded,
    histories: Option<&Histories>,
    header: &ProfileHeader,
    symbols: &dyn SymbolSource,
    options: &ViewOptions,
) {
    let model = CacheModel::from_header(&header.caches)
        .with_overrides(&options.overrides, header.online_cpus);
    if model.levels.is_empty() {
        report.warnings.push(Warning {
            code: WarningCode::NoCacheGeometry,
            message: "the profile gives no usable cache geometry (sysfs listed no complete data \
                      cache): conflict, capacity, set histograms and the cache simulation are \
                      empty; --cache L1d=SIZE/WAYS/LINE,L2=... supplies one"
                .to_owned(),
        });
    }
    let layout = layout::Layout::new(report, recorded, histories, &model, options.time_points);
    report.working_set = Some(working_set::report(
        report, recorded, &layout, &model, options,
    ));
    report.misses = Some(misses::report(
        report,
        recorded,
        histories,
        &layout,
        &model,
        header.online_cpus,
        symbols,
    ));
}

/// Exact live objects of every slab type at any time of `profile` (see [`LiveIndex`]), with
/// types named from the profile's own kallsyms: the address set replayed, nothing else
/// computed.
///
/// # Errors
/// The first problem found while reading the records.
pub fn live_index(profile: &Profile) -> Result<LiveIndex, ProfileError> {
    let symbols = crate::symbols::Kallsyms::parse(profile.kallsyms());
    let mut analyzer = crate::pipeline::Analyzer::new(
        profile.header(),
        &symbols,
        &crate::pipeline::Options::default(),
    );
    analyzer.record_views();
    let mut records = profile.records();
    while let Some(pushed) =
        records.next_view_with(|header, record| analyzer.push_view(header, record))
    {
        pushed?;
    }
    let (_, _, recorded) = analyzer.finish_with_views();
    Ok(recorded.map_or_else(LiveIndex::default, |r| LiveIndex::from_recorded(&r)))
}

/// Notes both views share: what the address set and the geometry cannot show.
fn common_notes(model: &CacheModel) -> Vec<String> {
    let mut notes = vec![
        "objects allocated before collection started are not in the address set: their \
         accesses, lines and lifetimes are not seen"
            .to_owned(),
        "only slab types are shown: globals, per-CPU data and stacks have no address set"
            .to_owned(),
    ];
    if model.levels.is_empty() {
        notes.push(
            "no cache geometry: conflict, capacity, histograms and the simulation are empty \
             (--cache gives one)"
                .to_owned(),
        );
    } else {
        notes.push(crate::cache::VIRTUAL_INDEX_NOTE.to_owned());
    }
    notes.extend(model.notes.iter().cloned());
    notes
}

/// Index of each name in `names`.
fn index_by_name(names: &[String]) -> FxHashMap<&str, usize> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect()
}
