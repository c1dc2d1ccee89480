//! A set-associative LRU cache simulator: one [`SetCache`] per cache of a level, lines tagged
//! with the object (and so the type) that brought them in, resident lines counted per type as
//! they come and go, so that a snapshot of a level's contents by type costs nothing.
//!
//! Each level sees every access of the CPUs that share it and keeps its own LRU order (levels
//! are not inclusive of each other and a hit in a nearer level does not hide the access from
//! the farther ones): the question asked of it is which lines each level would hold, not the
//! timing of a hierarchy.

use dprof_model::cache::CacheLevel;

/// An empty way.
const EMPTY: u64 = u64::MAX;

/// What one access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The line was there.
    Hit,
    /// It was not; `evicted` is the owner of the line it replaced, if any.
    Miss {
        /// The replaced line's owner.
        evicted: Option<u32>,
    },
}

/// One set-associative cache with LRU replacement. The ways are kept as parallel arrays, so
/// that the search of a set reads its line numbers only (two host cache lines for 16 ways):
/// the simulation's time goes into these reads.
#[derive(Clone, Debug)]
pub struct SetCache {
    ways: usize,
    set_mask: u64,
    /// Line number held by each way (set by set), [`EMPTY`] when free.
    lines: Vec<u64>,
    /// Last use of each way, for LRU (0: free).
    stamps: Vec<u64>,
    /// `(owner, type index)` of each way: the object that brought the line in, and its type.
    owners: Vec<(u32, u32)>,
    clock: u64,
    /// Resident lines per type index.
    resident: Vec<u64>,
}

impl SetCache {
    /// An empty cache of `sets` (a power of two) x `ways`.
    #[must_use]
    pub fn new(sets: u64, ways: u32) -> Self {
        let ways = ways.max(1) as usize;
        let sets = sets.max(1).next_power_of_two();
        let n = sets as usize * ways;
        Self {
            ways,
            set_mask: sets - 1,
            lines: vec![EMPTY; n],
            stamps: vec![0; n],
            owners: vec![(0, 0); n],
            clock: 0,
            resident: Vec::new(),
        }
    }

    /// An empty cache shaped like `level`.
    #[must_use]
    pub fn of(level: &CacheLevel) -> Self {
        Self::new(level.sets, level.ways)
    }

    /// The ways of `line`'s set, as a range of the arrays.
    fn set(&self, line: u64) -> std::ops::Range<usize> {
        let start = (line & self.set_mask) as usize * self.ways;
        start..start + self.ways
    }

    /// Accesses `line` for `owner` of type `type_index`: a hit refreshes it, a miss brings it
    /// in over the least recently used way.
    pub fn access(&mut self, line: u64, owner: u32, type_index: u32) -> Outcome {
        self.clock += 1;
        let set = self.set(line);
        let start = set.start;
        let lines = &self.lines[set.clone()];
        if let Some(w) = lines.iter().position(|&l| l == line) {
            self.stamps[start + w] = self.clock;
            return Outcome::Hit;
        }
        // A free way (stamp 0), else the least recently used.
        let mut victim = start;
        let mut oldest = u64::MAX;
        for (i, &stamp) in self.stamps[set].iter().enumerate() {
            if stamp < oldest {
                oldest = stamp;
                victim = start + i;
            }
        }
        let evicted = (self.lines[victim] != EMPTY).then(|| self.owners[victim]);
        self.lines[victim] = line;
        self.stamps[victim] = self.clock;
        self.owners[victim] = (owner, type_index);
        if let Some((_, old_type)) = evicted {
            self.count(old_type, false);
        }
        self.count(type_index, true);
        Outcome::Miss {
            evicted: evicted.map(|(o, _)| o),
        }
    }

    /// Drops `line` if `owner` brought it in (its object was freed). Returns whether it was
    /// there.
    pub fn evict(&mut self, line: u64, owner: u32) -> bool {
        let set = self.set(line);
        let start = set.start;
        let Some(w) = self.lines[set]
            .iter()
            .enumerate()
            .position(|(i, &l)| l == line && self.owners[start + i].0 == owner)
        else {
            return false;
        };
        let way = start + w;
        let (_, type_index) = self.owners[way];
        self.lines[way] = EMPTY;
        self.stamps[way] = 0;
        self.count(type_index, false);
        true
    }

    fn count(&mut self, type_index: u32, up: bool) {
        let i = type_index as usize;
        if i >= self.resident.len() {
            self.resident.resize(i + 1, 0);
        }
        if let Some(n) = self.resident.get_mut(i) {
            *n = if up { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    /// Lines of type `type_index` held now.
    #[must_use]
    pub fn resident(&self, type_index: u32) -> u64 {
        self.resident.get(type_index as usize).copied().unwrap_or(0)
    }

    /// Lines held now, all types together.
    #[must_use]
    pub fn occupied(&self) -> u64 {
        self.resident.iter().sum()
    }

    /// Whether `line` is held.
    #[must_use]
    pub fn contains(&self, line: u64) -> bool {
        self.lines[self.set(line)].contains(&line)
    }
}

/// Every cache of every level: the hierarchy the simulation drives.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    levels: Vec<LevelCaches>,
}

#[derive(Clone, Debug)]
struct LevelCaches {
    level: CacheLevel,
    /// Cache instance of each CPU, by CPU number (filled on first use).
    cpu_instance: Vec<Option<usize>>,
    /// Instance index (as [`CacheLevel::instance_of`] numbers them) to cache.
    caches: Vec<(usize, SetCache)>,
}

impl LevelCaches {
    fn cache_for(&mut self, cpu: u32) -> &mut SetCache {
        let c = cpu as usize;
        if c >= self.cpu_instance.len() {
            self.cpu_instance.resize(c + 1, None);
        }
        let instance = *self.cpu_instance[c].get_or_insert_with(|| self.level.instance_of(cpu));
        let at = if let Some(at) = self.caches.iter().position(|(i, _)| *i == instance) {
            at
        } else {
            self.caches.push((instance, SetCache::of(&self.level)));
            self.caches.len() - 1
        };
        &mut self.caches[at].1
    }
}

impl Hierarchy {
    /// Empty caches for `levels`.
    #[must_use]
    pub fn new(levels: &[CacheLevel]) -> Self {
        Self {
            levels: levels
                .iter()
                .map(|l| LevelCaches {
                    level: l.clone(),
                    cpu_instance: Vec::new(),
                    caches: Vec::new(),
                })
                .collect(),
        }
    }

    /// An access from `cpu` to byte address `addr` of `owner` (of type `type_index`), at
    /// every level.
    pub fn access(&mut self, cpu: u32, addr: u64, owner: u32, type_index: u32) {
        for l in &mut self.levels {
            let line = l.level.line_of(addr);
            l.cache_for(cpu).access(line, owner, type_index);
        }
    }

    /// `owner` was freed: its lines at byte addresses `addrs` leave every cache.
    pub fn free(&mut self, owner: u32, addrs: &[u64]) {
        for l in &mut self.levels {
            let shift = l.level.line_shift();
            for (_, cache) in &mut l.caches {
                for &addr in addrs {
                    cache.evict(addr >> shift, owner);
                }
            }
        }
    }

    /// Number of levels.
    #[must_use]
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Lines of `type_index` held at level `i`, all its caches together.
    #[must_use]
    pub fn resident(&self, i: usize, type_index: u32) -> u64 {
        self.levels.get(i).map_or(0, |l| {
            l.caches.iter().map(|(_, c)| c.resident(type_index)).sum()
        })
    }

    /// Lines level `i` can hold, all its caches in use together.
    #[must_use]
    pub fn capacity(&self, i: usize) -> u64 {
        self.levels
            .get(i)
            .map_or(0, |l| l.level.lines() * l.caches.len().max(1) as u64)
    }
}
