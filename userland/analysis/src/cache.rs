//! The cache geometry the miss classification and working-set views reason with: the data and
//! unified levels of the profile header (sysfs), named `L1d`, `L2`, `L3`, each checked for
//! consistency (sets = size / (ways x line), a power of two), and what-if overrides from
//! `--cache L1d=48K/12/64,L2=...` ([`parse_overrides`], [`CacheModel::with_overrides`]).
//!
//! Set indices come from *virtual* addresses ([`CacheLevel::set_of`]). Physically indexed
//! caches use physical addresses, but slab objects live in the kernel's direct map, whose base
//! is at least 1 GiB aligned: virtual and physical addresses agree in their low 30 bits, so in
//! every set bit of a cache whose `sets x line` is at most 1 GiB ([`MAX_WAY_BYTES`]). Memory
//! from vmalloc is mapped page by page and is the exception.
//!
//! [`sim`] is a set-associative LRU simulator over these levels.

pub mod sim;

#[cfg(test)]
mod tests;

use dprof_format::CacheGeometry;
use dprof_model::cache::{CacheLevel, GeometrySource};

/// Largest `sets x line` for which a virtual address gives the physical set index: the
/// direct map's alignment (1 GiB).
pub const MAX_WAY_BYTES: u64 = 1 << 30;

/// What the views say about where set indices come from, in their "could not see" notes.
pub const VIRTUAL_INDEX_NOTE: &str = "set indices come from virtual addresses: slab objects live \
     in the kernel's direct map, whose base is 1 GiB aligned, so they agree with the physical \
     set bits of any cache with at most 1 GiB per way; memory from vmalloc is mapped page by \
     page and may fall into other sets than shown";

/// Why a cache's numbers cannot describe a set-associative cache the views can index.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GeometryError {
    /// The profile lacks a number (virtual machines do not always give them).
    #[error("sysfs gives no {0}")]
    Missing(&'static str),
    /// The line size is 0 or not a power of two.
    #[error("the line size {0} is not a power of two")]
    Line(u32),
    /// No ways (sysfs writes 0 for a fully associative cache).
    #[error("0 ways (fully associative, or unknown)")]
    NoWays,
    /// The size is not a whole number of sets.
    #[error("{size} bytes is not a multiple of {ways} ways x {line}-byte lines")]
    NotMultiple {
        /// Bytes.
        size: u64,
        /// Ways.
        ways: u32,
        /// Line size.
        line: u32,
    },
    /// The sets are not a power of two (sliced caches hash addresses to sets).
    #[error("size / (ways x line) = {0} sets, not a power of two")]
    Sets(u64),
    /// sysfs's set count disagrees with the other numbers.
    #[error("sysfs says {sysfs} sets but size / (ways x line) gives {computed}")]
    SetsDisagree {
        /// `number_of_sets`.
        sysfs: u64,
        /// From size, ways and line.
        computed: u64,
    },
    /// One way spans more than the direct map's alignment.
    #[error(
        "{0} bytes per way (sets x line) is over 1 GiB: virtual addresses no longer give the set"
    )]
    TooLarge(u64),
}

/// Checks size, ways and line and gives the number of sets.
///
/// # Errors
/// When they do not describe a set-associative cache with a power-of-two number of sets of at
/// most [`MAX_WAY_BYTES`] per way.
pub fn sets_of(size: u64, ways: u32, line: u32) -> Result<u64, GeometryError> {
    if line == 0 || !line.is_power_of_two() {
        return Err(GeometryError::Line(line));
    }
    if ways == 0 {
        return Err(GeometryError::NoWays);
    }
    let way_line = u64::from(ways) * u64::from(line);
    if size == 0 || !size.is_multiple_of(way_line) {
        return Err(GeometryError::NotMultiple { size, ways, line });
    }
    let sets = size / way_line;
    if !sets.is_power_of_two() {
        return Err(GeometryError::Sets(sets));
    }
    let way_bytes = sets * u64::from(line);
    if way_bytes > MAX_WAY_BYTES {
        return Err(GeometryError::TooLarge(way_bytes));
    }
    Ok(sets)
}

/// The name of a data or unified level: `L1d`, `L2`, ...; `None` for instruction caches.
#[must_use]
pub fn level_name(level: u32, cache_type: &str) -> Option<String> {
    match cache_type {
        "Data" => Some(format!("L{level}d")),
        "Unified" => Some(format!("L{level}")),
        _ => None,
    }
}

/// The cache levels of a profile, after overrides, with what was left out and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheModel {
    /// Data and unified levels, nearest first.
    pub levels: Vec<CacheLevel>,
    /// One sentence per level left out, or per disagreement between CPUs.
    pub notes: Vec<String>,
}

impl CacheModel {
    /// The data and unified levels of a profile header's caches (one entry per distinct cache,
    /// as [`crate::system::cache_geometry`] writes them). A level whose numbers are
    /// incomplete or inconsistent is left out with a note; where the caches of one level
    /// disagree (hybrid CPUs), the first is used and the note says so.
    #[must_use]
    pub fn from_header(caches: &[CacheGeometry]) -> Self {
        let mut model = Self::default();
        let mut names: Vec<String> = Vec::new();
        for c in caches {
            if let Some(name) = level_name(c.level, &c.cache_type) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        for name in names {
            let group: Vec<&CacheGeometry> = caches
                .iter()
                .filter(|c| level_name(c.level, &c.cache_type).as_deref() == Some(name.as_str()))
                .collect();
            let Some(first) = group.first() else { continue };
            let numbers = |c: &CacheGeometry| (c.size_bytes, c.ways, c.line_bytes, c.sets);
            if group.iter().any(|c| numbers(c) != numbers(first)) {
                model.notes.push(format!(
                    "{name}: the CPUs' caches differ (hybrid cores?); the views use the one of \
                     CPUs {}",
                    first.shared_cpu_list
                ));
            }
            match level_from_sysfs(first) {
                Ok((size_bytes, ways, line_bytes, sets)) => model.levels.push(CacheLevel {
                    name,
                    level: first.level,
                    size_bytes,
                    ways,
                    line_bytes,
                    sets,
                    shared_cpus: first.shared_cpu_list.clone(),
                    instances: group.iter().map(|c| c.shared_cpu_list.clone()).collect(),
                    source: GeometrySource::Profile,
                }),
                Err(e) => model.notes.push(format!(
                    "{name} left out: {e}; --cache {name}=SIZE/WAYS/LINE gives it"
                )),
            }
        }
        model.levels.sort_by_key(|l| l.level);
        model
    }

    /// This model with `overrides` replacing levels of the same name (their CPU sharing is
    /// kept) or adding levels: a new level 1 or 2 gets one cache per CPU of `online_cpus`, a
    /// new level 3 or more one cache shared by all.
    #[must_use]
    pub fn with_overrides(mut self, overrides: &[CacheOverride], online_cpus: u32) -> Self {
        for o in overrides {
            let (shared_cpus, instances) = match self.levels.iter().find(|l| l.name == o.name) {
                Some(old) => (old.shared_cpus.clone(), old.instances.clone()),
                None if o.level <= 2 => {
                    let each: Vec<String> =
                        (0..online_cpus.max(1)).map(|c| c.to_string()).collect();
                    ("0".to_owned(), each)
                }
                None => {
                    let all = match online_cpus {
                        0 | 1 => "0".to_owned(),
                        n => format!("0-{}", n - 1),
                    };
                    (all.clone(), vec![all])
                }
            };
            self.levels.retain(|l| l.name != o.name);
            self.notes
                .retain(|n| !n.starts_with(&format!("{} left out", o.name)));
            self.levels.push(CacheLevel {
                name: o.name.clone(),
                level: o.level,
                size_bytes: o.size_bytes,
                ways: o.ways,
                line_bytes: o.line_bytes,
                sets: o.sets,
                shared_cpus,
                instances,
                source: GeometrySource::Override,
            });
        }
        self.levels
            .sort_by(|a, b| a.level.cmp(&b.level).then_with(|| a.name.cmp(&b.name)));
        self
    }

    /// The level named `name`.
    #[must_use]
    pub fn level(&self, name: &str) -> Option<&CacheLevel> {
        self.levels.iter().find(|l| l.name == name)
    }
}

/// Size, ways, line and sets of one sysfs cache, completing a missing size or way count
/// from the others.
fn level_from_sysfs(c: &CacheGeometry) -> Result<(u64, u32, u32, u64), GeometryError> {
    let line = c.line_bytes.ok_or(GeometryError::Missing("line size"))?;
    if line == 0 || !line.is_power_of_two() {
        return Err(GeometryError::Line(line));
    }
    let sysfs_sets = c.sets.map(u64::from);
    let (size, ways) = match (c.size_bytes, c.ways, sysfs_sets) {
        (Some(size), Some(ways), _) => (size, ways),
        (None, Some(ways), Some(sets)) => (sets * u64::from(ways) * u64::from(line), ways),
        (Some(size), None, Some(sets)) if sets > 0 => {
            let ways = size / (sets * u64::from(line));
            (size, u32::try_from(ways).unwrap_or(0))
        }
        (None, _, _) => return Err(GeometryError::Missing("size")),
        (Some(_), _, _) => return Err(GeometryError::Missing("associativity")),
    };
    let sets = sets_of(size, ways, line)?;
    match sysfs_sets {
        Some(s) if s != sets => Err(GeometryError::SetsDisagree {
            sysfs: s,
            computed: sets,
        }),
        _ => Ok((size, ways, line, sets)),
    }
}

/// One `NAME=SIZE/WAYS/LINE` of `--cache`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOverride {
    /// `L1d`, `L2`, ...
    pub name: String,
    /// Its level.
    pub level: u32,
    /// Bytes.
    pub size_bytes: u64,
    /// Ways.
    pub ways: u32,
    /// Line size.
    pub line_bytes: u32,
    /// Sets.
    pub sets: u64,
}

/// A `--cache` argument that does not describe caches.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheSpecError {
    /// Nothing given.
    #[error("--cache needs NAME=SIZE/WAYS/LINE, e.g. L1d=48K/12/64,L2=2M/16/64")]
    Empty,
    /// A part is not `NAME=SIZE/WAYS/LINE`.
    #[error("{part:?}: expected NAME=SIZE/WAYS/LINE, e.g. L1d=48K/12/64")]
    Syntax {
        /// The part.
        part: String,
    },
    /// The name is not a data or unified level.
    #[error("{part:?}: unknown cache {name:?}: name a data or unified level, L1d, L2, L3 or L4")]
    Name {
        /// The part.
        part: String,
        /// The name.
        name: String,
    },
    /// The size does not parse.
    #[error("{part:?}: size {value:?} is not a number of bytes with an optional K or M suffix")]
    Size {
        /// The part.
        part: String,
        /// The size given.
        value: String,
    },
    /// The ways do not parse.
    #[error("{part:?}: ways {value:?} is not a whole number")]
    Ways {
        /// The part.
        part: String,
        /// The ways given.
        value: String,
    },
    /// The line size does not parse.
    #[error("{part:?}: line size {value:?} is not a whole number of bytes")]
    Line {
        /// The part.
        part: String,
        /// The line size given.
        value: String,
    },
    /// The numbers do not make a cache.
    #[error("{part:?}: {error}")]
    Geometry {
        /// The part.
        part: String,
        /// What is wrong.
        error: GeometryError,
    },
    /// A level named twice.
    #[error("{name} is given twice")]
    Duplicate {
        /// The level.
        name: String,
    },
}

/// Parses `--cache`: comma-separated `NAME=SIZE/WAYS/LINE` (SIZE in bytes, with a K or M
/// suffix: `L1d=48K/12/64,L2=2M/16/64`).
///
/// # Errors
/// The first part that is not a valid level, naming it and what is wrong.
pub fn parse_overrides(spec: &str) -> Result<Vec<CacheOverride>, CacheSpecError> {
    let mut out: Vec<CacheOverride> = Vec::new();
    for part in spec.split(',').map(str::trim) {
        if part.is_empty() {
            if spec.trim().is_empty() {
                return Err(CacheSpecError::Empty);
            }
            return Err(CacheSpecError::Syntax {
                part: part.to_owned(),
            });
        }
        let parsed = parse_one(part)?;
        if out.iter().any(|o| o.name == parsed.name) {
            return Err(CacheSpecError::Duplicate { name: parsed.name });
        }
        out.push(parsed);
    }
    Ok(out)
}

fn parse_one(part: &str) -> Result<CacheOverride, CacheSpecError> {
    let syntax = || CacheSpecError::Syntax {
        part: part.to_owned(),
    };
    let (name, numbers) = part.split_once('=').ok_or_else(syntax)?;
    let fields: Vec<&str> = numbers.split('/').map(str::trim).collect();
    let [size, ways, line] = fields.as_slice() else {
        return Err(syntax());
    };
    let (name, level) = parse_level_name(name.trim()).ok_or_else(|| CacheSpecError::Name {
        part: part.to_owned(),
        name: name.trim().to_owned(),
    })?;
    let size_bytes = dprof_model::units::parse_cache_size(&size.to_ascii_uppercase())
        .filter(|&n| n > 0)
        .ok_or_else(|| CacheSpecError::Size {
            part: part.to_owned(),
            value: (*size).to_owned(),
        })?;
    let ways: u32 = ways.parse().map_err(|_| CacheSpecError::Ways {
        part: part.to_owned(),
        value: (*ways).to_owned(),
    })?;
    let line_bytes: u32 = line.parse().map_err(|_| CacheSpecError::Line {
        part: part.to_owned(),
        value: (*line).to_owned(),
    })?;
    let sets = sets_of(size_bytes, ways, line_bytes).map_err(|error| CacheSpecError::Geometry {
        part: part.to_owned(),
        error,
    })?;
    Ok(CacheOverride {
        name,
        level,
        size_bytes,
        ways,
        line_bytes,
        sets,
    })
}

/// `L1d`/`l1d` → (`L1d`, 1); `L2` → (`L2`, 2); `L1` is a unified level 1. Levels 1 to 9.
fn parse_level_name(name: &str) -> Option<(String, u32)> {
    let rest = name.strip_prefix(['L', 'l'])?;
    let (digit, data) = match rest.as_bytes() {
        [d] => (*d, false),
        [d, b'd' | b'D'] => (*d, true),
        _ => return None,
    };
    let level = u32::from(digit.checked_sub(b'0').filter(|&n| (1..=9).contains(&n))?);
    let name = if data {
        format!("L{level}d")
    } else {
        format!("L{level}")
    };
    Some((name, level))
}
