//! What the main pass records for the views: object lifetimes and slab samples, and the
//! views' options.

use rustc_hash::FxHashMap;

use crate::cache::CacheOverride;
use crate::resolve::LiveObject;
use dprof_model::AccessKind;

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
    /// The allocation's call site.
    pub call_site: u64,
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
    /// The times the views cover: those of the slab events ([`Recorded::events_span`]), else
    /// the earliest and latest record times.
    pub span: Option<(u64, u64)>,
}

impl Recorded {
    /// The times the slab events cover: from the first allocation to the last allocation or
    /// end of a lifetime; `None` without allocations.
    #[must_use]
    pub fn events_span(&self) -> Option<(u64, u64)> {
        let first = self.lifetimes.iter().map(|l| l.alloc_ns).min()?;
        let last = self
            .lifetimes
            .iter()
            .map(|l| l.end_ns.unwrap_or(l.alloc_ns).max(l.alloc_ns))
            .max()?;
        Some((first, last))
    }

    /// Records an allocation; its serial must be the next lifetime's index (the address set
    /// numbers objects in allocation order).
    pub(crate) fn alloc(&mut self, obj: &LiveObject, call_site: u64) {
        if obj.serial != self.lifetimes.len() as u64 {
            return;
        }
        self.lifetimes.push(Lifetime {
            base: obj.base,
            size: obj.size,
            type_id: obj.type_id.0,
            alloc_cpu: obj.alloc_cpu,
            call_site,
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
    #[expect(clippy::too_many_arguments, reason = "the fields of one sample")]
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

/// Index of each name in `names`.
pub(super) fn index_by_name(names: &[String]) -> FxHashMap<&str, usize> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect()
}
