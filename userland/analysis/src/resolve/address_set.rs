//! The address set (paper section 4): the objects live at the current replay time, as an
//! interval map from address to object.
//!
//! Objects are kept in a slot vector (recycled through a free list) and indexed by page: a hash
//! map from each 4 KiB page to the objects up to [`MAX_PAGED_BYTES`] that touch it, each entry
//! carrying the object's size and type (see [`page`]: slab pages by position, others sorted by
//! start). A sample's lookup is one hash probe and a division or a short binary search within
//! one page, without touching the object itself; that is several times faster than walking a
//! tree over millions of samples. Objects larger
//! than [`MAX_PAGED_BYTES`] (rare: large kmallocs) are kept in a `BTreeMap` by start instead.
//!
//! Live objects never overlap (an allocation over live objects replaces them), so the last
//! object starting at or below an address is the only one that can hold it. Memory grows with
//! live objects only, never with allocations or samples.

use std::collections::BTreeMap;

use super::types::TypeId;

mod page;

use crate::table::Table;
use page::{Entry, PageIndex, PAGE_SHIFT, PAGE_SIZE};
pub use page::{Slot, NO_CPU};

/// Objects up to this size are indexed by page (at most 17 pages each); larger ones are found
/// through a tree by start address.
pub const MAX_PAGED_BYTES: u64 = 64 * 1024;

/// One object in the address set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveObject {
    /// Start address.
    pub base: u64,
    /// Bytes the allocator handed out.
    pub size: u32,
    /// The object's type.
    pub type_id: TypeId,
    /// When it was allocated (ns).
    pub alloc_time_ns: u64,
    /// CPU that allocated it.
    pub alloc_cpu: u32,
    /// Serial number of the allocation within the profile (0, 1, ...): tells lifetimes apart
    /// when an address is reused.
    pub serial: u64,
}

/// `touched` bit: samples from more than one CPU touched the object.
const BOUNCED: u32 = 1 << 31;

/// Records in a touch state that a sample from `cpu` touched its object.
#[inline]
fn touch(t: &mut u32, cpu: u32) -> Touch {
    let cpu = cpu & !BOUNCED;
    if *t == NO_CPU {
        *t = cpu;
        Touch::First
    } else if *t & BOUNCED == 0 && *t != cpu {
        *t |= BOUNCED;
        Touch::Bounced
    } else {
        Touch::Again
    }
}

impl LiveObject {
    /// One past the last byte, saturating at the top of the address space.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.base.saturating_add(u64::from(self.size.max(1)))
    }
}

/// An allocation to insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewObject {
    /// Start address.
    pub base: u64,
    /// Bytes the allocator handed out.
    pub size: u32,
    /// The object's type.
    pub type_id: TypeId,
    /// Allocation time (ns).
    pub time_ns: u64,
    /// Allocating CPU.
    pub cpu: u32,
}

/// A live object found at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Its slot.
    pub slot: Slot,
    /// Its type.
    pub type_id: TypeId,
    /// Offset of the address in it.
    pub offset: u64,
}

/// An object [`AddressSet::remove_entry`] removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Its slot (free now; [`AddressSet::get`] still gives the object until the next
    /// insertion).
    pub slot: Slot,
    /// Bytes the allocator handed out.
    pub size: u32,
    /// Its type.
    pub type_id: TypeId,
}

/// What a sample's touch did to an object's CPU history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// The first sample of this lifetime.
    First,
    /// Touched before, and no new CPU bounce.
    Again,
    /// The first touch from a second CPU in this lifetime.
    Bounced,
}

/// The live objects at one point of the replay.
#[derive(Clone, Debug, Default)]
pub struct AddressSet {
    /// Page number to the objects up to `MAX_PAGED_BYTES` touching the page.
    pages: Table<u64, PageIndex>,
    /// Start to slot of the objects larger than `MAX_PAGED_BYTES`.
    large: BTreeMap<u64, Slot>,
    slots: Slots,
    live: usize,
    next_serial: u64,
}

/// The objects by slot, apart from the page map so that an insertion can hold a page's index
/// while it takes a slot.
#[derive(Clone, Debug, Default)]
struct Slots {
    objects: Vec<LiveObject>,
    /// Per slot: first CPU whose sample touched the object ([`NO_CPU`]: none), | `BOUNCED`;
    /// used for objects that cross a page boundary (the others' is in their page's index).
    touched: Vec<u32>,
    free: Vec<Slot>,
}

impl Slots {
    /// Stores a new object in a free slot, or a new one.
    #[inline]
    fn take(&mut self, obj: LiveObject) -> Slot {
        if let Some(slot) = self.free.pop() {
            if let Some(place) = self.objects.get_mut(slot as usize) {
                *place = obj;
            }
            if let Some(t) = self.touched.get_mut(slot as usize) {
                *t = NO_CPU;
            }
            slot
        } else {
            // More than 2^32 live objects cannot come from a real kernel; saturating keeps the
            // index consistent (the last slot is shared) rather than panicking.
            let slot = u32::try_from(self.objects.len()).unwrap_or(u32::MAX);
            self.objects.push(obj);
            self.touched.push(NO_CPU);
            slot
        }
    }
}

/// Pages `[first, last]` that `size` bytes at `base` touch.
fn page_span(base: u64, size: u32) -> (u64, u64) {
    let end = base.saturating_add(u64::from(size.max(1))) - 1;
    (base >> PAGE_SHIFT, end >> PAGE_SHIFT)
}

fn is_paged(size: u32) -> bool {
    u64::from(size) <= MAX_PAGED_BYTES
}

impl AddressSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of live objects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no object is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Starts and slots of the live objects overlapping `[base, end)`.
    fn overlapping(&self, base: u64, end: u64) -> Vec<(u64, Slot)> {
        let mut found: Vec<(u64, Slot)> = Vec::new();
        let first = base >> PAGE_SHIFT;
        let last = (end - 1) >> PAGE_SHIFT;
        let mut scan = |page: u64, index: &PageIndex| {
            let page_base = page << PAGE_SHIFT;
            // The range meets the page, so both ends are within 2^32 + a page of its start.
            let lo = base.wrapping_sub(page_base) as i64;
            let hi = end.wrapping_sub(page_base) as i64;
            index.overlapping(lo, hi, |e| {
                if !found.iter().any(|&(_, s)| s == e.slot) {
                    found.push((page_base.wrapping_add(i64::from(e.rel) as u64), e.slot));
                }
            });
        };
        if last - first < self.pages.len() as u64 {
            for page in first..=last {
                if let Some(v) = self.pages.get(page) {
                    scan(page, v);
                }
            }
        } else {
            // A range with more pages than are indexed: look at every indexed page instead.
            for (page, v) in self.pages.iter() {
                if (first..=last).contains(&page) {
                    scan(page, v);
                }
            }
        }
        if !self.large.is_empty() {
            if let Some((&start, &slot)) = self.large.range(..base).next_back() {
                let size = self
                    .slots
                    .objects
                    .get(slot as usize)
                    .map_or(1, |o| o.size.max(1));
                if start.saturating_add(u64::from(size)) > base {
                    found.push((start, slot));
                }
            }
            found.extend(self.large.range(base..end).map(|(&s, &slot)| (s, slot)));
        }
        found
    }

    /// Inserts an allocation. Live objects it overlaps (their free was missed: lost records,
    /// or frees the tracepoints do not see) are removed first and handed to `replaced`.
    /// Returns the new object's slot.
    pub fn insert(&mut self, new: NewObject, mut replaced: impl FnMut(LiveObject)) -> Slot {
        if let Some(slot) = self.insert_in_one_page(new) {
            return slot;
        }
        let end = new.base.saturating_add(u64::from(new.size.max(1)));
        for (start, slot) in self.overlapping(new.base, end) {
            if let Some(obj) = self.slots.objects.get(slot as usize).copied() {
                self.unindex(start, slot, obj.size);
                replaced(obj);
            }
        }
        let obj = LiveObject {
            base: new.base,
            size: new.size,
            type_id: new.type_id,
            alloc_time_ns: new.time_ns,
            alloc_cpu: new.cpu,
            serial: self.next_serial,
        };
        self.next_serial += 1;
        let slot = self.slots.take(obj);
        self.live += 1;
        if is_paged(new.size) {
            let (first, last) = page_span(new.base, new.size);
            for page in first..=last {
                let rel = new.base.wrapping_sub(page << PAGE_SHIFT) as i64 as i32;
                self.pages.get_or_default(page).insert(Entry {
                    rel,
                    size: new.size,
                    slot,
                    type_id: new.type_id,
                    touched: NO_CPU,
                });
            }
        } else {
            self.large.insert(new.base, slot);
        }
        slot
    }

    /// [`AddressSet::insert`] of an object within one page that overlaps nothing, with one
    /// hash probe: most allocations. `None` (nothing changed) for any other.
    #[inline]
    fn insert_in_one_page(&mut self, new: NewObject) -> Option<Slot> {
        let (page, last) = page_span(new.base, new.size);
        if page != last || !self.large.is_empty() {
            return None;
        }
        // Within its page, so the start and the end fit.
        let rel = new.base.wrapping_sub(page << PAGE_SHIFT) as i64 as i32;
        let end = i64::from(rel) + i64::from(new.size.max(1));
        let index = self.pages.get_or_default(page);
        if index.overlaps(i64::from(rel), end) {
            return None;
        }
        let slot = self.slots.take(LiveObject {
            base: new.base,
            size: new.size,
            type_id: new.type_id,
            alloc_time_ns: new.time_ns,
            alloc_cpu: new.cpu,
            serial: self.next_serial,
        });
        self.next_serial += 1;
        self.live += 1;
        index.insert(Entry {
            rel,
            size: new.size,
            slot,
            type_id: new.type_id,
            touched: NO_CPU,
        });
        Some(slot)
    }

    /// Removes the object at `start` in `slot` from the indexes and frees the slot.
    fn unindex(&mut self, start: u64, slot: Slot, size: u32) {
        self.slots.free.push(slot);
        self.live = self.live.saturating_sub(1);
        if !is_paged(size) {
            self.large.remove(&start);
            return;
        }
        let (first, last) = page_span(start, size);
        for page in first..=last {
            let rel = start.wrapping_sub(page << PAGE_SHIFT) as i64 as i32;
            if let Some(index) = self.pages.get_mut(page) {
                index.remove(rel);
                if index.is_empty() {
                    self.pages.remove(page);
                }
            }
        }
    }

    /// The slot of the live object starting exactly at `base`.
    fn slot_at(&self, base: u64) -> Option<Slot> {
        let page = base >> PAGE_SHIFT;
        let rel = (base & ((1 << PAGE_SHIFT) - 1)) as i32;
        if let Some(e) = self
            .pages
            .get(page)
            .and_then(|index| index.starting_at(rel))
        {
            return Some(e.slot);
        }
        self.large.get(&base).copied()
    }

    /// Removes the object that starts exactly at `base` (a free), returning it; `None` when no
    /// live object starts there (allocated before collection, or its alloc was lost).
    pub fn remove(&mut self, base: u64) -> Option<LiveObject> {
        let removed = self.remove_entry(base)?;
        self.slots.objects.get(removed.slot as usize).copied()
    }

    /// [`AddressSet::remove`] answering from the page index alone: the slot, size and type
    /// without loading the object itself (a cache miss per free that the replay of a free
    /// does not need). The slot keeps the object until the next insertion reuses it.
    #[inline]
    pub fn remove_entry(&mut self, base: u64) -> Option<Removed> {
        // The first page's index is found once, to look the object up and to unindex it.
        let page = base >> PAGE_SHIFT;
        if let Some(index) = self.pages.get_mut(page) {
            let rel = (base & ((1 << PAGE_SHIFT) - 1)) as i32;
            if let Some(found) = index.remove(rel) {
                if index.is_empty() {
                    self.pages.remove(page);
                }
                let (_, last) = page_span(base, found.size);
                for page in page + 1..=last {
                    let rel = base.wrapping_sub(page << PAGE_SHIFT) as i64 as i32;
                    if let Some(index) = self.pages.get_mut(page) {
                        index.remove(rel);
                        if index.is_empty() {
                            self.pages.remove(page);
                        }
                    }
                }
                self.slots.free.push(found.slot);
                self.live = self.live.saturating_sub(1);
                return Some(Removed {
                    slot: found.slot,
                    size: found.size,
                    type_id: found.type_id,
                });
            }
        }
        let slot = self.slot_at(base)?;
        let obj = self.slots.objects.get(slot as usize).copied()?;
        self.unindex(base, slot, obj.size);
        Some(Removed {
            slot,
            size: obj.size,
            type_id: obj.type_id,
        })
    }

    /// The live object containing `addr`: its slot, type and the offset of `addr` in it.
    #[must_use]
    #[inline]
    pub fn find(&self, addr: u64) -> Option<Hit> {
        let page = addr >> PAGE_SHIFT;
        if let Some(index) = self.pages.get(page) {
            let rel = (addr & (PAGE_SIZE as u64 - 1)) as i32;
            if let Some(e) = index.find(rel) {
                return Some(Hit {
                    slot: e.slot,
                    type_id: e.type_id,
                    offset: (i64::from(rel) - i64::from(e.rel)) as u64,
                });
            }
        }
        self.find_large(addr)
    }

    /// The object larger than [`MAX_PAGED_BYTES`] containing `addr`.
    fn find_large(&self, addr: u64) -> Option<Hit> {
        if self.large.is_empty() {
            return None;
        }
        let (&start, &slot) = self.large.range(..=addr).next_back()?;
        let obj = self.slots.objects.get(slot as usize)?;
        let offset = addr - start;
        (offset < u64::from(obj.size)).then_some(Hit {
            slot,
            type_id: obj.type_id,
            offset,
        })
    }

    /// The live object containing `addr`, like [`AddressSet::find`], recording that a sample
    /// from `cpu` touched it.
    #[inline]
    pub fn find_touch(&mut self, addr: u64, cpu: u32) -> Option<(Hit, Touch)> {
        let page = addr >> PAGE_SHIFT;
        if let Some(index) = self.pages.get_mut(page) {
            let rel = (addr & (PAGE_SIZE as u64 - 1)) as i32;
            if let Some((e, here)) = index.find_mut(rel) {
                let hit = Hit {
                    slot: e.slot,
                    type_id: e.type_id,
                    offset: (i64::from(rel) - i64::from(e.rel)) as u64,
                };
                // An object within one page keeps its state in that page's entry (no miss on
                // the per-slot array); one across pages keeps one state by slot, whichever
                // page a sample lands in.
                let touched = if e.within_page() {
                    Some(here)
                } else {
                    self.slots.touched.get_mut(e.slot as usize)
                };
                return Some((hit, touched.map_or(Touch::Again, |t| touch(t, cpu))));
            }
        }
        let hit = self.find_large(addr)?;
        let touched = self.slots.touched.get_mut(hit.slot as usize);
        Some((hit, touched.map_or(Touch::Again, |t| touch(t, cpu))))
    }

    /// First of two prefetches for a lookup of `addr` a few records from now: its page's
    /// bucket in the page map.
    #[inline]
    pub fn prefetch_page(&self, addr: u64) {
        self.pages.prefetch(addr >> PAGE_SHIFT);
    }

    /// Second of two prefetches for a lookup of `addr` (after [`AddressSet::prefetch_page`]
    /// had time to bring the bucket in): the page index's entry for it.
    #[inline]
    pub fn prefetch_entry(&self, addr: u64) {
        if let Some(index) = self.pages.get(addr >> PAGE_SHIFT) {
            index.prefetch((addr & (PAGE_SIZE as u64 - 1)) as i32);
        }
    }

    /// Pages indexed by position (see [`page`]); for tests that must reach that form.
    #[cfg(test)]
    pub(crate) fn positional_pages(&self) -> usize {
        self.pages
            .iter()
            .filter(|(_, p)| matches!(p, PageIndex::Strided { .. }))
            .count()
    }

    /// The object in `slot`.
    #[must_use]
    pub fn get(&self, slot: Slot) -> Option<&LiveObject> {
        self.slots.objects.get(slot as usize)
    }
}
