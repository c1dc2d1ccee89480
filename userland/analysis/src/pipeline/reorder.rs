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
//! Records wait in one FIFO queue per CPU (a vector read from a head index; a record older
//! than its queue's tail, rare, is inserted in order), and a winner tree (a tournament over
//! the queues' head keys) names the queue whose head is the oldest record overall: emitting a
//! record replays one leaf-to-root path of log2(queues) comparisons, with no stale entries and
//! no record moved until it is emitted (by reference). A head key is `(time, queue)` packed
//! into a `u128`, so records of equal time leave in arrival order within a CPU, and by CPU
//! number across CPUs.

/// How often (in records pushed) the per-CPU watermark is recomputed.
pub const RECOMPUTE_EVERY: u64 = 256;

/// Bits of a head key below the time: the queue number.
const QUEUE_BITS: u32 = 12;

/// Queues kept for CPU numbers up to this; records of higher CPU numbers share the last one
/// (the profile reader already bounds CPU numbers by `nr_cpu_ids`).
const MAX_QUEUES: usize = 1 << QUEUE_BITS;

/// The head key of an empty queue: above every real key (a real key is below 2^76).
const EMPTY: u128 = u128::MAX;

/// A queue's consumed prefix is dropped (the rest moved to the front) once it is at least this
/// long and at least half the queue, so that a queue that never empties stays bounded.
const COMPACT_MIN: usize = 1024;

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
    /// (time, item) from `head` on, sorted by time, arrival order among equal times; the
    /// items before `head` have been emitted.
    items: Vec<(u64, T)>,
    head: usize,
    /// Newest time seen from this CPU (`None`: not seen).
    latest: Option<u64>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            head: 0,
            latest: None,
        }
    }
}

/// `(time, queue)` as one comparable number.
#[inline]
fn key(time: u64, q: usize) -> u128 {
    (u128::from(time) << QUEUE_BITS) | q as u128
}

/// Reorders items tagged with (cpu, time).
pub struct ReorderBuffer<T> {
    queues: Vec<Queue<T>>,
    /// Leaves: the queues' head keys ([`EMPTY`] when empty), padded to a power of two.
    leaves: usize,
    /// Winner tree: node `leaves + q` is queue `q`'s head key, node `j` in `1..leaves` the
    /// smallest key under it, so node 1 is the oldest head overall (node 0 is unused).
    tree: Vec<u128>,
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
            leaves: 1,
            tree: vec![EMPTY, EMPTY],
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
    #[inline]
    pub fn push(&mut self, cpu: u32, time: u64, item: T, mut emit: impl FnMut(u64, &T)) {
        if self.last_emitted.is_some_and(|last| time < last) {
            self.counts.late += 1;
        }
        self.newest = self.newest.max(time);
        self.first_time.get_or_insert(time);
        let q = (cpu as usize).min(MAX_QUEUES - 1);
        if q >= self.queues.len() {
            self.grow(q + 1);
        }
        let queue = &mut self.queues[q];
        if let Some(latest) = &mut queue.latest {
            *latest = (*latest).max(time);
        } else {
            queue.latest = Some(time);
            self.cpus_seen += 1;
        }
        let head = queue.head;
        let back = queue.items.last().map(|&(t, _)| t);
        let new_head = match back {
            Some(t) if t > time => {
                let at = head + queue.items[head..].partition_point(|&(t, _)| t <= time);
                queue.items.insert(at, (time, item));
                at == head
            }
            _ => {
                queue.items.push((time, item));
                back.is_none()
            }
        };
        if new_head {
            self.update(q, key(time, q));
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
        // Most pushes emit nothing: say so without entering the loop. The buffer holds the
        // item just pushed, so the winner is a real key.
        let oldest = (self.tree[1] >> QUEUE_BITS) as u64;
        if oldest <= floor || self.len > self.capacity {
            self.drain(Some(floor), &mut emit);
        }
    }

    /// Accounts for an item that skips the buffer because its input is already merged in time
    /// order (format version 2's blocks, see `dprof_format::Profile::records`): counted as
    /// late when older than one already emitted, as a buffered item would be.
    #[inline]
    pub fn pass(&mut self, time: u64) {
        match &mut self.last_emitted {
            Some(last) if time < *last => self.counts.late += 1,
            Some(last) => *last = time,
            None => self.last_emitted = Some(time),
        }
    }

    /// Hands every buffered item to `emit`, oldest first (at the end of the input).
    pub fn finish(&mut self, mut emit: impl FnMut(u64, &T)) {
        self.drain(None, &mut emit);
    }

    /// Makes room for `queues` queues, rebuilding the tree when it needs more leaves.
    #[cold]
    fn grow(&mut self, queues: usize) {
        self.queues.resize_with(queues, Queue::default);
        let n = queues.next_power_of_two();
        if n <= self.leaves {
            return;
        }
        let mut tree = vec![EMPTY; 2 * n];
        tree[n..n + self.leaves].copy_from_slice(&self.tree[self.leaves..]);
        for j in (1..n).rev() {
            tree[j] = tree[2 * j].min(tree[2 * j + 1]);
        }
        self.tree = tree;
        self.leaves = n;
    }

    /// Sets queue `q`'s head key and replays the path from its leaf to the root.
    #[inline]
    fn update(&mut self, q: usize, mut key: u128) {
        let mut j = self.leaves + q;
        self.tree[j] = key;
        while j > 1 {
            let sibling = self.tree[j ^ 1];
            let min = key.min(sibling);
            j >>= 1;
            self.tree[j] = min;
            key = min;
        }
    }

    /// Emits items while the oldest is at or below `floor` (all with `None`), or the buffer
    /// is over capacity.
    fn drain(&mut self, floor: Option<u64>, emit: &mut impl FnMut(u64, &T)) {
        while self.len > 0 {
            // Not empty, so the winner is a real key, below 2^76.
            let winner = self.tree[1];
            let q = (winner as usize) & (MAX_QUEUES - 1);
            let time = (winner >> QUEUE_BITS) as u64;
            let over = self.len > self.capacity;
            let due = floor.is_none_or(|f| time <= f);
            if !due && !over {
                break;
            }
            let queue = &mut self.queues[q];
            emit(time, &queue.items[queue.head].1);
            queue.head += 1;
            let next = if queue.head == queue.items.len() {
                queue.items.clear();
                queue.head = 0;
                EMPTY
            } else {
                if queue.head >= COMPACT_MIN && queue.head * 2 >= queue.items.len() {
                    queue.items.drain(..queue.head);
                    queue.head = 0;
                }
                key(queue.items[queue.head].0, q)
            };
            self.update(q, next);
            self.len -= 1;
            if !due {
                self.counts.forced += 1;
            }
            self.last_emitted = Some(self.last_emitted.map_or(time, |l| l.max(time)));
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
