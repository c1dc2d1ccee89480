//! One page's index of the live objects that touch it.
//!
//! Most pages are slab pages: many objects of one size, one after another at that size's
//! stride. Such a page is indexed by position (`(offset - first) / size`), so a lookup is a
//! division and one load however many objects the page holds; a sorted list needs a binary
//! search whose steps each miss the cache once the page holds dozens of small objects. Pages
//! that hold objects of mixed sizes or phases (missed frees, large objects, holes) keep the
//! sorted list. A page switches to positions when it holds [`STRIDED_MIN`] uniform objects
//! and back to a list below [`STRIDED_KEEP`], so a nearly empty page costs little memory.

use crate::resolve::types::TypeId;

/// Bytes in a page.
pub(super) const PAGE_SHIFT: u32 = 12;
pub(super) const PAGE_SIZE: i64 = 1 << PAGE_SHIFT;

/// Identifies a live object for as long as it lives: the slot may be reused after a free.
pub type Slot = u32;

/// A `touched` value: no sample touched the object yet.
pub const NO_CPU: u32 = u32::MAX;

/// One object as one page sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Start relative to the page's first byte (negative for objects starting in an earlier
    /// page; objects are at most `MAX_PAGED_BYTES`, so it fits).
    pub rel: i32,
    pub size: u32,
    pub slot: Slot,
    pub type_id: TypeId,
    /// The object's touch state (see [`super::AddressSet::find_touch`]) when it lies within
    /// this page; [`NO_CPU`] and unused for an object that crosses a page boundary, whose
    /// one state is kept by slot.
    pub touched: u32,
}

impl Entry {
    fn end(&self) -> i64 {
        i64::from(self.rel) + i64::from(self.size.max(1))
    }

    /// Whether the object lies within this page, so that its touch state is kept here.
    #[inline]
    pub fn within_page(&self) -> bool {
        self.rel >= 0 && self.end() <= PAGE_SIZE
    }
}

/// One position of a page indexed by position. The touch state sits beside the slot: a
/// sample's lookup then updates it without a miss on a separate per-slot array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Position {
    slot: Slot,
    type_id: TypeId,
    touched: u32,
}

/// An empty position.
const VACANT: Position = Position {
    slot: EMPTY,
    type_id: TypeId(0),
    touched: NO_CPU,
};

/// A page with this many objects of one size and phase is indexed by position.
const STRIDED_MIN: usize = 8;
/// A page indexed by position goes back to a list when fewer objects than this are left.
const STRIDED_KEEP: u32 = 4;
/// An empty position.
const EMPTY: Slot = Slot::MAX;

/// The objects touching one page.
#[derive(Clone, Debug)]
pub(super) enum PageIndex {
    /// Sorted by start; objects never overlap, so by end too.
    Sorted(Vec<Entry>),
    /// Objects of `size` bytes at starts `first + k * size`: position `k` holds the object's
    /// slot, type and touch state, or an [`EMPTY`] slot.
    Strided {
        size: u32,
        /// Start of position 0: in `(-size, 0]`.
        first: i32,
        live: u32,
        positions: Box<[Position]>,
    },
}

impl Default for PageIndex {
    fn default() -> Self {
        Self::Sorted(Vec::new())
    }
}

impl PageIndex {
    /// Whether no object touches the page.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Sorted(v) => v.is_empty(),
            Self::Strided { live, .. } => *live == 0,
        }
    }

    /// The object containing byte `rel` of the page (`0 <= rel < PAGE_SIZE`).
    #[inline]
    pub fn find(&self, rel: i32) -> Option<Entry> {
        match self {
            Self::Sorted(v) => {
                let at = v.partition_point(|e| e.rel <= rel);
                let e = *v.get(at.checked_sub(1)?)?;
                (i64::from(rel) < i64::from(e.rel) + i64::from(e.size)).then_some(e)
            }
            Self::Strided {
                size,
                first,
                positions,
                ..
            } => {
                let k = (i64::from(rel) - i64::from(*first)) / i64::from(*size);
                let p = *positions.get(usize::try_from(k).ok()?)?;
                (p.slot != EMPTY).then(|| p.entry(*first, *size, k))
            }
        }
    }

    /// [`PageIndex::find`], with the place of the object's touch state in this page.
    #[inline]
    pub fn find_mut(&mut self, rel: i32) -> Option<(Entry, &mut u32)> {
        match self {
            Self::Sorted(v) => {
                let at = v.partition_point(|e| e.rel <= rel);
                let e = v.get_mut(at.checked_sub(1)?)?;
                if i64::from(rel) < i64::from(e.rel) + i64::from(e.size) {
                    Some((*e, &mut e.touched))
                } else {
                    None
                }
            }
            Self::Strided {
                size,
                first,
                positions,
                ..
            } => {
                let k = (i64::from(rel) - i64::from(*first)) / i64::from(*size);
                let p = positions.get_mut(usize::try_from(k).ok()?)?;
                if p.slot == EMPTY {
                    return None;
                }
                Some((p.entry(*first, *size, k), &mut p.touched))
            }
        }
    }

    /// The object starting exactly at `rel`.
    pub fn starting_at(&self, rel: i32) -> Option<Entry> {
        match self {
            Self::Sorted(v) => v
                .binary_search_by_key(&rel, |e| e.rel)
                .ok()
                .and_then(|at| v.get(at).copied()),
            Self::Strided { size, first, .. } => {
                let k = exact_position(*first, *size, rel)?;
                self.find(position_start(*first, *size, k))
            }
        }
    }

    /// Asks the CPU to bring in where [`PageIndex::find`] of `rel` will look.
    #[inline]
    pub fn prefetch(&self, rel: i32) {
        match self {
            // The binary search's first probe; small lists are a line or two.
            Self::Sorted(v) => {
                if let Some(e) = v.get(v.len() / 2) {
                    crate::prefetch(e);
                }
            }
            Self::Strided {
                size,
                first,
                positions,
                ..
            } => {
                let k = (i64::from(rel) - i64::from(*first)) / i64::from(*size);
                if let Some(p) = usize::try_from(k).ok().and_then(|k| positions.get(k)) {
                    crate::prefetch(p);
                }
            }
        }
    }

    /// Adds an object; the caller has removed every object it overlaps.
    pub fn insert(&mut self, new: Entry) {
        if let Self::Strided {
            size,
            first,
            live,
            positions,
        } = self
        {
            let k = (new.size == *size && new.slot != EMPTY)
                .then(|| exact_position(*first, *size, new.rel))
                .flatten()
                .and_then(|k| usize::try_from(k).ok())
                .filter(|&k| k < positions.len());
            if let Some(place) = k.and_then(|k| positions.get_mut(k)) {
                debug_assert_eq!(place.slot, EMPTY, "inserting over a live object");
                if place.slot == EMPTY {
                    *live += 1;
                }
                *place = Position {
                    slot: new.slot,
                    type_id: new.type_id,
                    touched: new.touched,
                };
                return;
            }
            // Another size or phase: this page is no longer uniform.
            *self = Self::Sorted(self.entries());
        }
        if let Self::Sorted(v) = self {
            let at = v.partition_point(|e| e.rel < new.rel);
            v.insert(at, new);
            // Checking uniformity is linear, so it is done only as the list doubles.
            if v.len() >= STRIDED_MIN && v.len().is_power_of_two() {
                if let Some(strided) = Self::strided_from(v) {
                    *self = strided;
                }
            }
        }
    }

    /// Removes the object starting exactly at `rel`, returning it.
    pub fn remove(&mut self, rel: i32) -> Option<Entry> {
        match self {
            Self::Sorted(v) => {
                let at = v.binary_search_by_key(&rel, |e| e.rel).ok()?;
                Some(v.remove(at))
            }
            Self::Strided {
                size,
                first,
                live,
                positions,
            } => {
                let k = exact_position(*first, *size, rel)?;
                let place = positions.get_mut(usize::try_from(k).ok()?)?;
                if place.slot == EMPTY {
                    return None;
                }
                let removed = place.entry(*first, *size, k);
                *place = VACANT;
                *live -= 1;
                if *live < STRIDED_KEEP {
                    *self = Self::Sorted(self.entries());
                }
                Some(removed)
            }
        }
    }

    /// Hands `f` every object overlapping bytes `[lo, hi)` (relative to the page, possibly
    /// beyond it), by start.
    pub fn overlapping(&self, lo: i64, hi: i64, mut f: impl FnMut(Entry)) {
        match self {
            Self::Sorted(v) => {
                // The overlapping ones are a run starting at the last one that starts before
                // `lo`.
                let from = v.partition_point(|e| i64::from(e.rel) < lo);
                for e in v.get(from.saturating_sub(1)..).unwrap_or_default() {
                    if i64::from(e.rel) >= hi {
                        break;
                    }
                    if e.end() > lo {
                        f(*e);
                    }
                }
            }
            Self::Strided {
                size,
                first,
                positions,
                ..
            } => {
                let (first64, size64) = (i64::from(*first), i64::from(*size));
                let k_lo = (lo - first64).max(0) / size64;
                let k_hi = ((hi - first64).max(0) + size64 - 1) / size64;
                for k in k_lo..k_hi.min(positions.len() as i64) {
                    let Some(p) = usize::try_from(k).ok().and_then(|k| positions.get(k)) else {
                        continue;
                    };
                    let e = p.entry(*first, *size, k);
                    if p.slot != EMPTY && i64::from(e.rel) < hi && e.end() > lo {
                        f(e);
                    }
                }
            }
        }
    }

    /// Whether an object overlaps bytes `[lo, hi)` (relative to the page).
    #[inline]
    pub fn overlaps(&self, lo: i64, hi: i64) -> bool {
        let mut any = false;
        self.overlapping(lo, hi, |_| any = true);
        any
    }

    /// Every object, by start.
    fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        self.overlapping(i64::MIN / 2, i64::MAX / 2, |e| out.push(e));
        out
    }

    /// The positional form of a sorted list, if its objects share one size and phase.
    fn strided_from(v: &[Entry]) -> Option<Self> {
        let head = v.first()?;
        let size = head.size;
        if size == 0 || i64::from(size) > PAGE_SIZE || v.iter().any(|e| e.slot == EMPTY) {
            return None;
        }
        let first = i64::from(head.rel).rem_euclid(i64::from(size));
        let first = if first == 0 {
            0
        } else {
            first - i64::from(size)
        };
        let uniform = v
            .iter()
            .all(|e| e.size == size && (i64::from(e.rel) - first) % i64::from(size) == 0);
        if !uniform {
            return None;
        }
        let count = (PAGE_SIZE - first + i64::from(size) - 1) / i64::from(size);
        let mut positions = vec![VACANT; usize::try_from(count).ok()?];
        for e in v {
            let k = usize::try_from((i64::from(e.rel) - first) / i64::from(size)).ok()?;
            *positions.get_mut(k)? = Position {
                slot: e.slot,
                type_id: e.type_id,
                touched: e.touched,
            };
        }
        Some(Self::Strided {
            size,
            first: i32::try_from(first).ok()?,
            live: u32::try_from(v.len()).ok()?,
            positions: positions.into_boxed_slice(),
        })
    }
}

impl Position {
    /// The entry of position `k` of a page indexed by position with these `first` and `size`.
    #[inline]
    fn entry(self, first: i32, size: u32, k: i64) -> Entry {
        Entry {
            rel: position_start(first, size, k),
            size,
            slot: self.slot,
            type_id: self.type_id,
            touched: self.touched,
        }
    }
}

/// Start of position `k`.
fn position_start(first: i32, size: u32, k: i64) -> i32 {
    (i64::from(first) + k * i64::from(size)) as i32
}

/// The position starting exactly at `rel`, if one does.
fn exact_position(first: i32, size: u32, rel: i32) -> Option<i64> {
    let d = i64::from(rel) - i64::from(first);
    (d >= 0 && d % i64::from(size) == 0).then(|| d / i64::from(size))
}
