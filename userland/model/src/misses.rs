//! The miss classification view in the report (paper section 3.3): per slab type, why its
//! accesses miss, in six classes that add up to the total, with the evidence for each.

use serde::{Deserialize, Serialize};

/// Why an access missed, or would have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissClass {
    /// Another CPU wrote the same bytes.
    TrueSharing,
    /// Another CPU wrote other bytes of the line, within the object.
    FalseSharing,
    /// The line's set holds too many of the type's lines.
    Conflict,
    /// The working set exceeds the cache.
    Capacity,
    /// The line is shared with a neighbour object the history cannot see.
    CannotTell,
    /// None of the above.
    Unclassified,
}

impl MissClass {
    /// Every class, in report order.
    pub const ALL: [Self; 6] = [
        Self::TrueSharing,
        Self::FalseSharing,
        Self::Conflict,
        Self::Capacity,
        Self::CannotTell,
        Self::Unclassified,
    ];

    /// As the report writes it: `true sharing`, ...
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::TrueSharing => "true sharing",
            Self::FalseSharing => "false sharing",
            Self::Conflict => "conflict",
            Self::Capacity => "capacity",
            Self::CannotTell => "cannot tell",
            Self::Unclassified => "unclassified",
        }
    }

    /// Position in [`MissClass::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The miss classification section of a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MissReport {
    /// No hardware miss bits: the classes are of the accesses that would miss.
    pub inferred: bool,
    /// What was classified, in words.
    pub basis: String,
    /// The cache levels used.
    pub geometry: Vec<crate::cache::CacheLevel>,
    /// What the view could not see, one sentence each.
    pub notes: Vec<String>,
    /// Slab types with samples classified or sharing seen, in data-profile order.
    pub types: Vec<TypeMisses>,
}

impl MissReport {
    /// The type named `name`.
    #[must_use]
    pub fn find_type(&self, name: &str) -> Option<&TypeMisses> {
        self.types.iter().find(|t| t.name == name)
    }
}

/// One type's classification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeMisses {
    /// As the data profile names it.
    pub name: String,
    /// Samples classified (misses with a hardware sampler).
    pub total: u64,
    /// Every class, in [`MissClass::ALL`] order; the counts add up to `total`.
    pub classes: Vec<ClassCount>,
    /// The class with the most.
    pub dominant: MissClass,
    /// Its percentage points over the runner-up.
    pub margin: f64,
    /// Invalidations seen in histories: the writing and the missing access, most first.
    pub sharing: Vec<SharingEvidence>,
    /// History accesses to lines shared with a neighbour object, with no invalidation seen
    /// within the object, most first.
    #[serde(default)]
    pub cannot_tell: Vec<CannotTellEvidence>,
    /// Levels where sets are flagged for the type.
    pub conflict: Vec<ConflictEvidence>,
    /// The farthest level whose capacity the working set exceeds with the type spread over
    /// most of its sets.
    pub capacity: Option<CapacityEvidence>,
    /// How the type's history accesses were judged; absent without histories.
    #[serde(default)]
    pub history_accesses: Option<HistoryJudgement>,
}

impl TypeMisses {
    /// The count of `class`.
    #[must_use]
    pub fn count(&self, class: MissClass) -> f64 {
        self.classes
            .iter()
            .find(|c| c.class == class)
            .map_or(0.0, |c| c.count)
    }
}

/// Samples of one class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassCount {
    /// The class.
    pub class: MissClass,
    /// Samples (fractional: see the module doc).
    pub count: f64,
    /// Of the type's total.
    pub percent: f64,
}

/// One access of a history, as evidence.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharingSite {
    /// Function of the instruction.
    pub function: String,
    /// The accessing instruction (the trap ip when it was not found).
    pub ip: u64,
    /// CPU.
    pub cpu: u32,
    /// Offset in the object (of the watched range).
    pub offset: u64,
    /// Bytes accessed (of the range when the instruction was not found).
    pub size: u32,
    /// Field name at the offset, given debug info.
    pub field: Option<String>,
}

/// A write from one CPU and the access on another that it invalidated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharingEvidence {
    /// [`MissClass::TrueSharing`] or [`MissClass::FalseSharing`].
    pub class: MissClass,
    /// Times seen.
    pub count: u64,
    /// The write.
    pub writer: SharingSite,
    /// The access after it.
    pub missing: SharingSite,
}

/// An access to a line shared with a neighbour object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CannotTellEvidence {
    /// Times seen.
    pub count: u64,
    /// The access.
    pub missing: SharingSite,
    /// The type of the neighbour found first.
    pub neighbour_type: String,
}

/// Flagged sets of one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConflictEvidence {
    /// The level.
    pub level: String,
    /// The sets.
    pub flagged_sets: Vec<u64>,
    /// The type's lines in them, at its peak.
    pub lines_in_flagged_sets: u64,
    /// Samples classified as conflict at this level.
    #[serde(default)]
    pub samples: f64,
}

/// Why the type's misses count as capacity misses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityEvidence {
    /// The level.
    pub level: String,
    /// The most bytes of lines the sampled types' live objects touched at once.
    pub working_set_bytes: u64,
    /// One cache of the level.
    pub cache_bytes: u64,
    /// The type's lines cover this share of the level's sets.
    pub sets_covered_fraction: f64,
}

/// How a type's history accesses were judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryJudgement {
    /// Accesses judged (mismatched traps left out).
    pub accesses: u64,
    /// True sharing.
    pub true_sharing: u64,
    /// False sharing.
    pub false_sharing: u64,
    /// Cannot tell.
    pub cannot_tell: u64,
}
