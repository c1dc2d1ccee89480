//! A bounded reorder buffer: records come in file order (per-CPU runs, interleaved per drain)
//! and leave in timestamp order.
//!
//! # The bound
//! The module writes each CPU's records to that CPU's ring in (nearly) time order, and the
//! collector drains every ring over and over, so within the file each CPU's records are
//! nearly time-ordered while records of different CPUs are interleaved by drain. A record
//! with time `t` can therefore leave the buffer once no record still to come can be older:
//!
//! - **Per-CPU watermark**: with `latest[c]` the newest time seen from CPU `c`, later records
//!   from `c` are not older than `latest[c]`, so every record older than `min_c latest[c]`
//!   (over the CPUs seen) is safe to emit. This keeps the buffer to about one drain round while
//!   all CPUs produce records. It is only trusted once every online CPU has been seen or one
//!   window has passed, so that a CPU whose first drain comes late is waited for.
//! - **Window**: a CPU that goes quiet (idle, no samples) would hold the watermark back
//!   forever, so records older than `newest - window` leave regardless. The window (2 s by
//!   default) is longer than the collector's longest gap between drains of one ring.
//! - **Capacity**: a hard cap on buffered records; above it the oldest leaves at once.
//!
//! Memory is thus bounded by the records of one window (and by the cap), never by the length
//! of the profile. Records that arrive older than one already emitted are still emitted, in
//! place, and counted as late: the analysis says how many were.
//!
//! The watermark is recomputed every [`RECOMPUTE_EVERY`] records, not on every record: a stale
//! watermark is lower, hence still safe, and the scan over CPUs stays off the hot path.
//!
//! # Structure
//! Records wait in one FIFO queue per CPU (a record older than its queue's tail, rare, is
//! inserted in order), and a small heap holds each queue's head time, so the oldest record
//! overall is found in O(log CPUs) and records move once, rather than sifting through one big
//! heap. A heap entry whose queue's head has changed since is stale and skipped when it comes
//! up; every non-empty queue always has an entry with its head's time, so the top entry that
//! matches its queue's head is the oldest record. Records of equal time leave in arrival order
//! within a CPU, and by CPU number across CPUs.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

/// How often (in records pushed) the per-CPU watermark is recomputed.
pub const RECOMPUTE_EVERY: u64 = 256;

/// Queues kept for CPU numbers up to this; records of higher CPU numbers share the last one
/// (the profile reader already bounds CPU numbers by `nr_cpu_ids`).
const MAX_QUEUES: usize = 1 << 12;

/// Counters of reordering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderCounts {
    /// Records that arrived older than a record already emitted.
    pub late: u64,
    /// Records emitted early because the buffer was at capacity.
    pub forced: u64,
    /// Most records buffered at once.
    pub max_buffered: u64,
}

/// One CPU's records.
struct Queue<T> {
    /// (time, item), sorted by time, arrival order among equal times.
    items: VecDeque<(u64, T)>,
    /// Newest time seen from this CPU (`None`: not seen).
    latest: Option<u64>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self {
            items: VecDeque::new(),
            latest: None,
        }
    }
}

/// Reorders items tagged with (cpu, time).
pub struct ReorderBuffer<T> {
    queues: Vec<Queue<T>>,
    /// (time, queue) of queue heads; see the module doc for stale entries.
    heads: BinaryHeap<Reverse<(u64, u32)>>,
    len: usize,
    cpus_seen: usize,
    expected_cpus: usize,
    first_time: Option<u64>,
    newest: u64,
    window_ns: u64,
    capacity: usize,
    watermark: u64,
    pushed: u64,
    last_emitted: Option<u64>,
    counts: ReorderCounts,
}

impl<T> ReorderBuffer<T> {
    /// A buffer that expects `expected_cpus` CPUs to produce records, lets records wait at most
    /// `window_ns` behind the newest, and holds at most `capacity` of them.
    #[must_use]
    pub fn new(expected_cpus: usize, window_ns: u64, capacity: usize) -> Self {
        Self {
            queues: Vec::new(),
            heads: BinaryHeap::new(),
            len: 0,
            cpus_seen: 0,
            expected_cpus: expected_cpus.max(1),
            first_time: None,
            newest: 0,
            window_ns,
            capacity: capacity.max(1),
            watermark: 0,
            pushed: 0,
            last_emitted: None,
            counts: ReorderCounts::default(),
        }
    }

    /// Adds an item, then hands every item that may leave to `emit`, oldest first.
    pub fn push(&mut self, cpu: u32, time: u64, item: T, mut emit: impl FnMut(u64, T)) {
        if self.last_emitted.is_some_and(|last| time < last) {
            self.counts.late += 1;
        }
        self.newest = self.newest.max(time);
        self.first_time.get_or_insert(time);
        let q = (cpu as usize).min(MAX_QUEUES - 1);
        if q >= self.queues.len() {
            self.queues.resize_with(q + 1, Queue::default);
        }
        let Some(queue) = self.queues.get_mut(q) else {
            return;
        };
        if let Some(latest) = &mut queue.latest {
            *latest = (*latest).max(time);
        } else {
            queue.latest = Some(time);
            self.cpus_seen += 1;
        }
        // MAX_QUEUES fits in u32.
        let key = Reverse((time, q as u32));
        if queue.items.back().is_none_or(|&(t, _)| t <= time) {
            queue.items.push_back((time, item));
            if queue.items.len() == 1 {
                self.heads.push(key);
            }
        } else {
            let at = queue.items.partition_point(|&(t, _)| t <= time);
            queue.items.insert(at, (time, item));
            if at == 0 {
                self.heads.push(key);
            }
        }
        self.len += 1;
        self.counts.max_buffered = self.counts.max_buffered.max(self.len as u64);
        self.pushed += 1;
        if self.pushed.is_multiple_of(RECOMPUTE_EVERY) {
            self.recompute_watermark();
        }
        let floor = self
            .newest
            .saturating_sub(self.window_ns)
            .max(self.watermark);
        // Most pushes emit nothing: say so without entering the loop.
        let oldest_due = self.heads.peek().is_some_and(|Reverse((t, _))| *t <= floor);
        if oldest_due || self.len > self.capacity {
            self.drain(Some(floor), &mut emit);
        }
    }

    /// Hands every buffered item to `emit`, oldest first (at the end of the input).
    pub fn finish(&mut self, mut emit: impl FnMut(u64, T)) {
        self.drain(None, &mut emit);
    }

    /// Emits items while the oldest is at or below `floor` (all with `None`), or the buffer
    /// is over capacity.
    fn drain(&mut self, floor: Option<u64>, emit: &mut impl FnMut(u64, T)) {
        while let Some(mut top) = self.heads.peek_mut() {
            let Reverse((time, q)) = *top;
            let Some(queue) = self.queues.get_mut(q as usize) else {
                PeekMut::pop(top);
                continue;
            };
            if queue.items.front().is_none_or(|&(t, _)| t != time) {
                // Stale: the queue's head changed since this entry was pushed.
                PeekMut::pop(top);
                continue;
            }
            let over = self.len > self.capacity;
            let due = floor.is_none_or(|f| time <= f);
            if !due && !over {
                break;
            }
            let Some((time, item)) = queue.items.pop_front() else {
                PeekMut::pop(top);
                continue;
            };
            // The queue's next record replaces its head in place (one sift instead of a pop
            // and a push).
            match queue.items.front() {
                Some(&(t, _)) => *top = Reverse((t, q)),
                None => {
                    PeekMut::pop(top);
                }
            }
            self.len -= 1;
            if !due {
                self.counts.forced += 1;
            }
            self.last_emitted = Some(self.last_emitted.map_or(time, |l| l.max(time)));
            emit(time, item);
        }
    }

    fn recompute_watermark(&mut self) {
        let warmed_up = self.cpus_seen >= self.expected_cpus
            || self
                .first_time
                .is_some_and(|f| self.newest.saturating_sub(f) >= self.window_ns);
        if !warmed_up {
            return;
        }
        if let Some(min) = self.queues.iter().filter_map(|q| q.latest).min() {
            self.watermark = self.watermark.max(min);
        }
    }

    /// Items buffered now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is buffered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counters so far.
    #[must_use]
    pub fn counts(&self) -> ReorderCounts {
        self.counts
    }
}
