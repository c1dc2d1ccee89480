//! Exact live objects and bytes of each slab type at any time, from the address set's
//! lifetimes.

use rustc_hash::FxHashMap;

use super::recorded::Recorded;

/// Exact live objects and bytes of each type at any time, from the address set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveIndex {
    types: FxHashMap<String, TypeLive>,
}

/// One type's allocation and end times, sorted, with running byte sums.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TypeLive {
    allocs: Vec<u64>,
    alloc_bytes: Vec<u64>,
    ends: Vec<u64>,
    end_bytes: Vec<u64>,
}

/// Sorted times and the running sum of their sizes.
fn sorted_with_sums(mut items: Vec<(u64, u64)>) -> (Vec<u64>, Vec<u64>) {
    items.sort_unstable();
    let mut sum = 0u64;
    items
        .into_iter()
        .map(|(t, bytes)| {
            sum += bytes;
            (t, sum)
        })
        .unzip()
}

/// How many of `sorted` are at most `t`.
fn at_most(sorted: &[u64], t: u64) -> usize {
    sorted.partition_point(|&x| x <= t)
}

impl TypeLive {
    fn objects_at(&self, t: u64) -> u64 {
        (at_most(&self.allocs, t) - at_most(&self.ends, t).min(at_most(&self.allocs, t))) as u64
    }

    fn bytes_at(&self, t: u64) -> u64 {
        let sum = |sums: &[u64], n: usize| n.checked_sub(1).map_or(0, |i| sums[i]);
        sum(&self.alloc_bytes, at_most(&self.allocs, t))
            .saturating_sub(sum(&self.end_bytes, at_most(&self.ends, t)))
    }

    /// Peak objects and when first reached, peak bytes, and time-weighted means over
    /// `[start, end]`: a sweep over allocations and ends (ends first at equal times).
    fn sweep(&self, (start, end): (u64, u64)) -> Sweep {
        let (mut i, mut j) = (0, 0);
        let mut objects = 0u64;
        let mut bytes = 0u64;
        let mut out = Sweep {
            peak_time: start,
            ..Sweep::default()
        };
        let mut last = start;
        let (mut object_ns, mut byte_ns) = (0u128, 0u128);
        let mut advance = |to: u64, objects: u64, bytes: u64| {
            let to = to.clamp(start, end);
            let dt = u128::from(to.saturating_sub(last));
            object_ns += u128::from(objects) * dt;
            byte_ns += u128::from(bytes) * dt;
            last = last.max(to);
        };
        while i < self.allocs.len() || j < self.ends.len() {
            let next_end = self.ends.get(j).copied().unwrap_or(u64::MAX);
            let next_alloc = self.allocs.get(i).copied().unwrap_or(u64::MAX);
            let t = next_end.min(next_alloc);
            advance(t, objects, bytes);
            // Everything at `t`: ends, then allocations.
            while self.ends.get(j) == Some(&t) {
                objects = objects.saturating_sub(1);
                j += 1;
            }
            while self.allocs.get(i) == Some(&t) {
                objects += 1;
                i += 1;
            }
            let sum = |sums: &[u64], n: usize| n.checked_sub(1).map_or(0, |k| sums[k]);
            bytes = sum(&self.alloc_bytes, i).saturating_sub(sum(&self.end_bytes, j));
            if objects > out.peak_objects {
                out.peak_objects = objects;
                out.peak_time = t;
            }
            out.peak_bytes = out.peak_bytes.max(bytes);
        }
        advance(end, objects, bytes);
        let width = end.saturating_sub(start);
        if width == 0 {
            out.mean_objects = self.objects_at(start) as f64;
            out.mean_bytes = self.bytes_at(start) as f64;
        } else {
            out.mean_objects = object_ns as f64 / width as f64;
            out.mean_bytes = byte_ns as f64 / width as f64;
        }
        out
    }
}

/// One type's live objects and bytes over a span: peaks and time-weighted means.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sweep {
    pub(super) peak_objects: u64,
    pub(super) peak_time: u64,
    pub(super) peak_bytes: u64,
    pub(super) mean_objects: f64,
    pub(super) mean_bytes: f64,
}

impl LiveIndex {
    /// The index of what the main pass recorded.
    #[must_use]
    pub fn from_recorded(recorded: &Recorded) -> Self {
        // Per type: (time, bytes) of allocations, and of ends.
        type Events = (Vec<(u64, u64)>, Vec<(u64, u64)>);
        let mut allocs: FxHashMap<u32, Events> = FxHashMap::default();
        for l in &recorded.lifetimes {
            let (a, e) = allocs.entry(l.type_id).or_default();
            a.push((l.alloc_ns, u64::from(l.size)));
            if let Some(end) = l.end_ns {
                e.push((end, u64::from(l.size)));
            }
        }
        let types = allocs
            .into_iter()
            .map(|(id, (a, e))| {
                let (allocs, alloc_bytes) = sorted_with_sums(a);
                let (ends, end_bytes) = sorted_with_sums(e);
                (
                    recorded.type_name(id).to_owned(),
                    TypeLive {
                        allocs,
                        alloc_bytes,
                        ends,
                        end_bytes,
                    },
                )
            })
            .collect();
        Self { types }
    }

    /// Objects of type `type_name` live at `t` (ns, the records' clock): allocated at or
    /// before `t` during collection, not ended (freed or replaced) at or before it. Objects
    /// allocated before collection started are not counted.
    #[must_use]
    pub fn live_objects(&self, type_name: &str, t: u64) -> u64 {
        self.types.get(type_name).map_or(0, |l| l.objects_at(t))
    }

    /// Bytes (as allocated) of type `type_name` live at `t`, as [`LiveIndex::live_objects`].
    #[must_use]
    pub fn live_bytes(&self, type_name: &str, t: u64) -> u64 {
        self.types.get(type_name).map_or(0, |l| l.bytes_at(t))
    }

    /// The types with objects, in no particular order.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// When `type_name` first had the most objects live.
    pub(super) fn peak_time(&self, type_name: &str) -> Option<u64> {
        let l = self.types.get(type_name)?;
        let first = l.allocs.first().copied()?;
        Some(l.sweep((first, first)).peak_time)
    }

    pub(super) fn sweep(&self, type_name: &str, span: (u64, u64)) -> Sweep {
        self.types
            .get(type_name)
            .map_or_else(Sweep::default, |l| l.sweep(span))
    }
}
