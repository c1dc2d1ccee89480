//! A cache level as the views reasoned with it: its geometry, where the geometry came from,
//! and how an address maps to a line, a set and a cache instance.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

/// Where a level's geometry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeometrySource {
    /// The profile header (sysfs of the profiled machine).
    Profile,
    /// `--cache` on the command line.
    Override,
}

/// One data or unified cache level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLevel {
    /// `L1d`, `L2`, `L3` (a unified level 1 is `L1`).
    pub name: String,
    /// 1, 2, 3, ...
    pub level: u32,
    /// Bytes of one cache of this level.
    pub size_bytes: u64,
    /// Associativity.
    pub ways: u32,
    /// Line size in bytes (a power of two).
    pub line_bytes: u32,
    /// `size_bytes / (ways x line_bytes)`, a power of two.
    pub sets: u64,
    /// The CPUs sharing one cache of this level, as a kernel CPU list (`0`, `0-3`): the first
    /// of [`CacheLevel::instances`].
    pub shared_cpus: String,
    /// Every cache of this level, each as the CPU list sharing it (`["0", "1"]`: one per CPU;
    /// `["0-1"]`: one shared). CPUs in none of them get a private cache when the level is
    /// private (one CPU per cache), else share the first.
    #[serde(default)]
    pub instances: Vec<String>,
    /// Where the numbers came from.
    pub source: GeometrySource,
}

impl CacheLevel {
    /// `log2(line_bytes)`.
    #[must_use]
    pub fn line_shift(&self) -> u32 {
        self.line_bytes.trailing_zeros()
    }

    /// The line number of `addr` (`addr / line_bytes`).
    #[must_use]
    pub fn line_of(&self, addr: u64) -> u64 {
        addr >> self.line_shift()
    }

    /// The associativity set of `addr`, from its virtual address (see the module doc).
    #[must_use]
    pub fn set_of(&self, addr: u64) -> u64 {
        self.line_of(addr) & (self.sets - 1)
    }

    /// The set of line number `line`.
    #[must_use]
    pub fn set_of_line(&self, line: u64) -> u64 {
        line & (self.sets - 1)
    }

    /// Lines one cache of this level holds.
    #[must_use]
    pub fn lines(&self) -> u64 {
        self.sets * u64::from(self.ways)
    }

    /// Whether every cache of this level belongs to one CPU.
    #[must_use]
    pub fn is_private(&self) -> bool {
        !self.instances.is_empty()
            && self.instances.iter().all(|list| {
                cpu_list(list)
                    .is_some_and(|r| matches!(r.as_slice(), [one] if one.start() == one.end()))
            })
    }

    /// Which cache of this level `cpu` uses, as an index: the position of the instance whose
    /// CPU list holds it; for a CPU in no list, its own cache (numbered after the listed ones)
    /// when the level is private, else the first.
    #[must_use]
    pub fn instance_of(&self, cpu: u32) -> usize {
        let listed = self.instances.iter().position(|list| {
            cpu_list(list).is_some_and(|ranges| ranges.iter().any(|r| r.contains(&cpu)))
        });
        match listed {
            Some(i) => i,
            None if self.is_private() => self.instances.len() + cpu as usize,
            None => 0,
        }
    }

    /// `48 KiB 12-way, 64-byte lines, 64 sets`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "{} {}-way, {}-byte lines, {} sets",
            crate::units::format_bytes(self.size_bytes),
            self.ways,
            self.line_bytes,
            self.sets
        )
    }

    /// Which CPUs share the level ("per CPU" or "CPUs 0-3"), and where its numbers came from
    /// when `--cache` changed any level (`any_override`): how every front end labels a level.
    #[must_use]
    pub fn sharing_and_source(&self, any_override: bool) -> String {
        let sharing = if self.is_private() {
            "per CPU".to_owned()
        } else {
            format!("CPUs {}", self.shared_cpus)
        };
        let source = match (any_override, self.source) {
            (false, _) => "",
            (true, GeometrySource::Override) => ", --cache",
            (true, GeometrySource::Profile) => ", profile",
        };
        format!("{sharing}{source}")
    }
}

/// The CPU ranges of a kernel CPU list such as "0-3,8,10-11" (empty for ""); `None` if
/// malformed (a reversed range included).
#[must_use]
pub fn cpu_list(list: &str) -> Option<Vec<RangeInclusive<u32>>> {
    let list = list.trim();
    if list.is_empty() {
        return Some(Vec::new());
    }
    list.split(',')
        .map(|part| {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let (lo, hi) = (
                lo.trim().parse::<u32>().ok()?,
                hi.trim().parse::<u32>().ok()?,
            );
            (lo <= hi).then_some(lo..=hi)
        })
        .collect()
}
