//! Allocations that wait for their free to name their cache.
//!
//! Where the `kmem_cache_alloc` tracepoint does not name the cache (Linux 6.1), the collector
//! reads it from the object's slab when it drains the ring, a few milliseconds after the
//! allocation. A short-lived slab can be gone by then: its objects all freed, its page back in
//! the page allocator or reused by another cache. Seen on Debian's 6.1 under a file-tree
//! workload: up to 660 of 8,000 allocations, all of `dentry` and `filp`.
//!
//! SLUB frees a slab only once every object in it is free, so an object whose slab is gone
//! was freed before the read; `kmem_cache_free` fires before the object is freed and names
//! the cache, so its record was in a ring before the read, and the next full drain of every
//! ring has it. Such an allocation waits here, and the records of its CPU wait behind it, in
//! order, until that free names the cache, or two drains have passed (a `kfree`, which names
//! none; a lost record), when it takes the name its size gives. Frees of the two latest
//! drains are remembered for allocations whose free was drained before them.

use std::collections::{HashMap, VecDeque};

use dprof_abi::Alloc;

/// Drains an allocation waits for its free: the one under way and the next, which drains
/// every ring after the free was written.
const DRAINS_WAITED: u8 = 2;

/// What a free said of an object's cache: its identifier, or nothing (a `kfree`).
pub(super) type FreedAs = Option<u64>;

/// An allocation that waits for its cache's name.
#[derive(Debug)]
pub(super) struct WaitingAlloc {
    pub(super) time_ns: u64,
    /// The record, its cache not yet set.
    pub(super) alloc: Alloc,
    /// The name its size gives, if no free names one.
    pub(super) by_size: Vec<u8>,
    /// What its free said, once seen.
    freed_as: Option<FreedAs>,
    drains_left: u8,
}

impl WaitingAlloc {
    pub(super) fn new(time_ns: u64, alloc: Alloc, by_size: Vec<u8>) -> Self {
        Self {
            time_ns,
            alloc,
            by_size,
            freed_as: None,
            drains_left: DRAINS_WAITED,
        }
    }

    /// The cache its free named, if one did.
    pub(super) fn named_cache(&self) -> Option<u64> {
        self.freed_as.flatten()
    }

    fn ready(&self) -> bool {
        self.freed_as.is_some() || self.drains_left == 0
    }
}

/// One held item of a CPU, in the order it came.
#[derive(Debug)]
pub(super) enum Held {
    /// An encoded record.
    Record(Vec<u8>),
    /// An allocation, named or still waiting for its name.
    Alloc(WaitingAlloc),
}

/// The waiting allocations, the records held behind them per CPU, and recent frees.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    cpus: Vec<VecDeque<Held>>,
    /// Waiting allocations by object address, how many.
    by_ptr: HashMap<u64, u32>,
    /// Frees of this drain and the one before: (time, what they said) by object address.
    frees: [HashMap<u64, Vec<(u64, FreedAs)>>; 2],
}

impl Waiting {
    /// Whether `cpu`'s records must wait.
    pub(super) fn holds(&self, cpu: u32) -> bool {
        self.cpus.get(cpu as usize).is_some_and(|q| !q.is_empty())
    }

    /// Holds `record` of `cpu` behind what waits there.
    pub(super) fn hold(&mut self, cpu: u32, record: &[u8]) {
        self.queue(cpu).push_back(Held::Record(record.to_vec()));
    }

    /// Queues `alloc` of `cpu` behind what its CPU holds, to wait for its free unless a
    /// recent free already named it.
    pub(super) fn wait(&mut self, cpu: u32, mut alloc: WaitingAlloc) {
        match self.freed_since(alloc.alloc.ptr, alloc.time_ns) {
            Some(freed_as) => alloc.freed_as = Some(freed_as),
            None => *self.by_ptr.entry(alloc.alloc.ptr).or_default() += 1,
        }
        self.queue(cpu).push_back(Held::Alloc(alloc));
    }

    /// A free of `ptr` at `time_ns` that said `freed_as`: it names the oldest allocation
    /// of `ptr` that waits and is older. Returns the CPU whose records may now go on.
    pub(super) fn freed(&mut self, ptr: u64, time_ns: u64, freed_as: FreedAs) -> Option<u32> {
        let named = self.name_waiting(ptr, time_ns, freed_as);
        self.frees[0]
            .entry(ptr)
            .or_default()
            .push((time_ns, freed_as));
        named
    }

    fn name_waiting(&mut self, ptr: u64, time_ns: u64, freed_as: FreedAs) -> Option<u32> {
        if !self.by_ptr.contains_key(&ptr) {
            return None;
        }
        let (cpu, alloc) = self
            .cpus
            .iter_mut()
            .enumerate()
            .flat_map(|(cpu, q)| q.iter_mut().map(move |h| (cpu, h)))
            .filter_map(|(cpu, h)| match h {
                Held::Alloc(a)
                    if a.alloc.ptr == ptr && a.freed_as.is_none() && a.time_ns <= time_ns =>
                {
                    Some((cpu, a))
                }
                _ => None,
            })
            .min_by_key(|(_, a)| a.time_ns)?;
        alloc.freed_as = Some(freed_as);
        self.unwaited(ptr);
        Some(cpu as u32)
    }

    /// What the first recent free of `ptr` at or after `time_ns` said.
    fn freed_since(&self, ptr: u64, time_ns: u64) -> Option<FreedAs> {
        self.frees
            .iter()
            .filter_map(|f| f.get(&ptr))
            .flatten()
            .filter(|(t, _)| *t >= time_ns)
            .min_by_key(|(t, _)| *t)
            .map(|(_, freed_as)| *freed_as)
    }

    /// One drain has ended: allocations that waited long enough take their size's name.
    pub(super) fn drain_ended(&mut self) {
        for a in self.cpus.iter_mut().flatten().filter_map(|h| match h {
            Held::Alloc(a) => Some(a),
            Held::Record(_) => None,
        }) {
            a.drains_left = a.drains_left.saturating_sub(1);
        }
        let [newer, older] = &mut self.frees;
        std::mem::swap(newer, older);
        newer.clear();
    }

    /// Collection has ended: no free is still to come.
    pub(super) fn give_up(&mut self) {
        for a in self.cpus.iter_mut().flatten().filter_map(|h| match h {
            Held::Alloc(a) => Some(a),
            Held::Record(_) => None,
        }) {
            a.drains_left = 0;
        }
    }

    /// The oldest item of `cpu` that may go on, if any.
    pub(super) fn next_ready(&mut self, cpu: u32) -> Option<Held> {
        let q = self.cpus.get_mut(cpu as usize)?;
        if let Held::Alloc(a) = q.front()? {
            if !a.ready() {
                return None;
            }
        }
        let item = q.pop_front()?;
        if let Held::Alloc(a) = &item {
            if a.freed_as.is_none() {
                self.unwaited(a.alloc.ptr);
            }
        }
        Some(item)
    }

    /// One allocation of `ptr` no longer waits for its free.
    fn unwaited(&mut self, ptr: u64) {
        if let Some(n) = self.by_ptr.get_mut(&ptr) {
            *n -= 1;
            if *n == 0 {
                self.by_ptr.remove(&ptr);
            }
        }
    }

    /// CPUs with held items.
    pub(super) fn cpus_holding(&self) -> Vec<u32> {
        (0..self.cpus.len() as u32)
            .filter(|&c| self.holds(c))
            .collect()
    }

    fn queue(&mut self, cpu: u32) -> &mut VecDeque<Held> {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.cpus.resize_with(i + 1, VecDeque::new);
        }
        &mut self.cpus[i]
    }
}

#[cfg(test)]
mod tests;
