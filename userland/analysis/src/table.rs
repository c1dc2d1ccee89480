//! An open-addressing hash table with linear probing that can prefetch a key's bucket.
//!
//! A standard hash map would do, but it does not say where a key's bucket is; this table
//! does, so the replay can prefetch the buckets that records it will replay a few records
//! later need ([`Table::prefetch`]): with millions of samples over millions of live objects,
//! the analysis's cost is cache misses on its maps (the address set's pages, the
//! aggregation), not instructions. Removal shifts later entries back (no tombstones), so
//! lookups stay short.

#[cfg(test)]
mod tests;

/// A key of a [`Table`].
pub(crate) trait TableKey: Copy + Eq {
    /// The key of a vacant bucket: a value no real key takes.
    const VACANT: Self;
    /// The key's hash; the table uses its top bits.
    fn hash(self) -> u64;
}

/// Multiplier of Fibonacci hashing: consecutive keys spread over the table.
const FIB: u64 = 0x9e37_79b9_7f4a_7c15;

/// Page numbers: addresses shifted right by 12, below 2^52.
impl TableKey for u64 {
    const VACANT: Self = u64::MAX;
    #[inline]
    fn hash(self) -> u64 {
        self.wrapping_mul(FIB)
    }
}

/// Buckets of a new table.
const MIN_BUCKETS: usize = 64;

/// Key to value.
#[derive(Clone, Debug)]
pub(crate) struct Table<K, V> {
    /// `(key, value)`, `key == K::VACANT` (and a default value) for a vacant bucket; a power
    /// of two long, at most half full.
    buckets: Vec<(K, V)>,
    len: usize,
    /// `64 - log2(buckets.len())`: the hash's top bits index the buckets.
    shift: u32,
}

impl<K: TableKey, V: Default> Default for Table<K, V> {
    fn default() -> Self {
        Self {
            buckets: vacant(MIN_BUCKETS),
            len: 0,
            shift: 64 - MIN_BUCKETS.trailing_zeros(),
        }
    }
}

fn vacant<K: TableKey, V: Default>(n: usize) -> Vec<(K, V)> {
    let mut v = Vec::with_capacity(n);
    v.resize_with(n, || (K::VACANT, V::default()));
    v
}

impl<K: TableKey, V: Default> Table<K, V> {
    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// The bucket a key's probe starts at.
    #[inline]
    fn home(&self, key: K) -> usize {
        (key.hash() >> self.shift) as usize
    }

    /// The bucket holding `key`.
    #[inline]
    fn find(&self, key: K) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.buckets.get(i)?.0;
            if k == key {
                return Some(i);
            }
            if k == K::VACANT {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, key: K) -> Option<&V> {
        let i = self.find(key)?;
        self.buckets.get(i).map(|b| &b.1)
    }

    #[inline]
    pub fn get_mut(&mut self, key: K) -> Option<&mut V> {
        let i = self.find(key)?;
        self.buckets.get_mut(i).map(|b| &mut b.1)
    }

    /// The value of `key`, a default one inserted if it has none. `key` must not be
    /// [`TableKey::VACANT`].
    #[inline]
    pub fn get_or_default(&mut self, key: K) -> &mut V {
        let i = self.index_or_default(key);
        &mut self.buckets[i].1
    }

    /// The bucket of `key` (see [`Table::at`]), a default value inserted if it has none; valid
    /// until the table changes otherwise. `key` must not be [`TableKey::VACANT`].
    #[inline]
    pub fn index_or_default(&mut self, key: K) -> usize {
        debug_assert!(key != K::VACANT, "the vacant key inserted");
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        while self.buckets[i].0 != key && self.buckets[i].0 != K::VACANT {
            i = (i + 1) & mask;
        }
        let bucket = &mut self.buckets[i];
        if bucket.0 == K::VACANT {
            bucket.0 = key;
            self.len += 1;
        }
        i
    }

    /// The value in bucket `i` (from [`Table::index_or_default`]).
    #[inline]
    pub fn at(&self, i: usize) -> Option<&V> {
        self.buckets.get(i).map(|b| &b.1)
    }

    /// The value in bucket `i` (from [`Table::index_or_default`]).
    #[inline]
    pub fn at_mut(&mut self, i: usize) -> Option<&mut V> {
        self.buckets.get_mut(i).map(|b| &mut b.1)
    }

    /// Removes `key` and its value.
    pub fn remove(&mut self, key: K) {
        let Some(mut hole) = self.find(key) else {
            return;
        };
        self.buckets[hole] = (K::VACANT, V::default());
        self.len -= 1;
        // Backward shift: an entry after the hole moves into it when the hole lies on its
        // probe path (between its home and where it is), so that no probe stops early.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.buckets[j].0;
            if k == K::VACANT {
                return;
            }
            let start = self.home(k);
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
        for (key, value) in old.into_iter().filter(|b| b.0 != K::VACANT) {
            let mut i = self.home(key);
            while self.buckets[i].0 != K::VACANT {
                i = (i + 1) & mask;
            }
            self.buckets[i] = (key, value);
        }
    }

    /// Every `(key, value)`, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.buckets
            .iter()
            .filter(|b| b.0 != K::VACANT)
            .map(|(k, v)| (*k, v))
    }

    /// Asks the CPU to bring `key`'s bucket into the cache (its home bucket: almost always
    /// where the probe ends).
    #[inline]
    pub fn prefetch(&self, key: K) {
        if let Some(b) = self.buckets.get(self.home(key)) {
            crate::prefetch(b);
        }
    }
}
