//! The page map: page number to that page's [`PageIndex`], an open-addressing hash table with
//! linear probing.
//!
//! A standard hash map would do, but it does not say where a key's bucket is; this table
//! does, so the replay can prefetch the buckets of records it will replay a few records later
//! ([`PageTable::prefetch`]): a sample's lookup misses the cache on the bucket and then on the
//! page's positions, and with millions of samples those misses, not instructions, are the
//! cost. Removal shifts later entries back (no tombstones), so lookups stay short.

use super::page::PageIndex;

/// Key of a vacant bucket: page numbers are addresses shifted right by 12, below 2^52.
const VACANT: u64 = u64::MAX;

/// Buckets of a new table.
const MIN_BUCKETS: usize = 64;

/// Page number to page index.
#[derive(Clone, Debug)]
pub(super) struct PageTable {
    /// `(page, index)`, `page == VACANT` for a vacant bucket; a power of two long, at most
    /// half full.
    buckets: Vec<(u64, PageIndex)>,
    len: usize,
    /// `64 - log2(buckets.len())`: the hash is the top bits of a multiplication.
    shift: u32,
}

impl Default for PageTable {
    fn default() -> Self {
        Self {
            buckets: vacant(MIN_BUCKETS),
            len: 0,
            shift: 64 - MIN_BUCKETS.trailing_zeros(),
        }
    }
}

fn vacant(n: usize) -> Vec<(u64, PageIndex)> {
    let mut v = Vec::with_capacity(n);
    v.resize_with(n, || (VACANT, PageIndex::default()));
    v
}

impl PageTable {
    /// Pages indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// The bucket a page's probe starts at (Fibonacci hashing: consecutive pages spread).
    #[inline]
    fn home(&self, page: u64) -> usize {
        (page.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The bucket holding `page`.
    #[inline]
    fn find(&self, page: u64) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(page);
        loop {
            let key = self.buckets.get(i)?.0;
            if key == page {
                return Some(i);
            }
            if key == VACANT {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, page: u64) -> Option<&PageIndex> {
        let i = self.find(page)?;
        self.buckets.get(i).map(|b| &b.1)
    }

    #[inline]
    pub fn get_mut(&mut self, page: u64) -> Option<&mut PageIndex> {
        let i = self.find(page)?;
        self.buckets.get_mut(i).map(|b| &mut b.1)
    }

    /// The index of `page`, an empty one inserted if it has none.
    pub fn get_or_default(&mut self, page: u64) -> &mut PageIndex {
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(page);
        while self.buckets[i].0 != page && self.buckets[i].0 != VACANT {
            i = (i + 1) & mask;
        }
        let bucket = &mut self.buckets[i];
        if bucket.0 == VACANT {
            bucket.0 = page;
            self.len += 1;
        }
        &mut bucket.1
    }

    /// Removes `page` and its index.
    pub fn remove(&mut self, page: u64) {
        let Some(mut hole) = self.find(page) else {
            return;
        };
        self.buckets[hole] = (VACANT, PageIndex::default());
        self.len -= 1;
        // Backward shift: an entry after the hole moves into it when the hole lies on its
        // probe path (between its home and where it is), so that no probe stops early.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let key = self.buckets[j].0;
            if key == VACANT {
                return;
            }
            let start = self.home(key);
            if (j.wrapping_sub(start) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets.swap(hole, j);
                hole = j;
            }
        }
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        let old = std::mem::replace(&mut self.buckets, vacant(n));
        self.shift = 64 - n.trailing_zeros();
        let mask = n - 1;
        for (page, index) in old.into_iter().filter(|b| b.0 != VACANT) {
            let mut i = self.home(page);
            while self.buckets[i].0 != VACANT {
                i = (i + 1) & mask;
            }
            self.buckets[i] = (page, index);
        }
    }

    /// Every `(page, index)`, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &PageIndex)> {
        self.buckets
            .iter()
            .filter(|b| b.0 != VACANT)
            .map(|(p, index)| (*p, index))
    }

    /// Asks the CPU to bring `page`'s bucket into the cache (its home bucket: almost always
    /// where the probe ends).
    #[inline]
    pub fn prefetch(&self, page: u64) {
        if let Some(b) = self.buckets.get(self.home(page)) {
            crate::prefetch(b);
        }
    }
}
