//! The data profile analysis: records in, [`Report`] out.
//!
//! ```text
//! records (file order) ──▶ decode samples ──▶ reorder buffer ──▶ replay in time order:
//!   CacheInfo, Lost: applied at once           (bounded, see      Alloc/Free ─▶ address set
//!   samples w/o a data address: counted        [`reorder`])       sample ─▶ resolve ─▶ aggregate
//! ```
//!
//! Only what needs time order goes through the reorder buffer: allocations, frees and samples
//! with a data address. Cache infos (metadata) and lost counts apply at once; samples that have
//! no data address (user mode, no memory operand, ...) are counted at once. A version 2 or 3
//! profile's records are read already merged in time order: they skip the buffer
//! ([`Analyzer::records_in_time_order`]), and are replayed in batches as they come. The same
//! pass keeps the history records for [`crate::histories`], so the records are read once.
//!
//! Samples from a hardware sampler (IBS, PEBS) bring their own data address and say whether
//! the access missed L1, where the data came from and its latency ([`crate::hardware`]); the
//! report then ranks types by misses and adds those statistics per type, field and function.
//!
//! Memory grows with live objects, types, and distinct (type, instruction, offset) keys, never
//! with the number of samples: the reorder buffer is bounded (see [`reorder`]) and samples are
//! aggregated as they leave it.
//!
//! On a large profile the cost is cache misses, not instructions: each record's lookups
//! (instruction cache, page map, page entry, aggregation) miss and depend on each other. So
//! what leaves the reorder buffer is replayed in batches (at most 256 records, all replayed
//! before the next record is read) with prefetches a few records ahead (`replay_batch`),
//! and the next record's instruction is prefetched while the current one is analysed
//! ([`Analyzer::prefetch_next`]). Prefetches are hints: results do not depend on them.
//!
//! [`Analyzer`] is the streaming form (a live session can feed it records as they are read);
//! [`analyze`] runs it over a [`Profile`], on two threads when the machine has two CPUs
//! ([`Options::two_threads`]): a front [`Analyzer`] reads the records, decodes the samples and
//! counts what needs no replay, and forwards the rest in record order (events, cache infos,
//! new `%gs` bases) in batches through a bounded channel to this thread's [`Analyzer`], which
//! reorders and replays them as it would have. The report is the same either way.

pub mod reorder;

#[cfg(test)]
mod hw_tests;
#[cfg(test)]
mod tests;

pub use crate::sampled::{AccessStats, SampledAccesses};
use dprof_abi::{
    Alloc, Record, RecordHeader, RecordKind, RecordView, FREE_PAGES, RECORD_HEADER_SIZE,
    SAMPLER_KIND_SOFTWARE, SAMPLE_USER,
};

use crate::decode::{DecodeOutcome, Decoder, MemAccess, SampleFields};
use crate::hardware::HwAccess;
use crate::kernel_debugging::DebuggingCode;
use crate::profiler_code::ProfilerCode;
use crate::resolve::{Resolution, Resolver, SampleContext, SymbolSource, Touch, TypeId};
use crate::table::{Table, TableKey};
use dprof_format::{Profile, ProfileError, ProfileHeader};
use dprof_model::{
    AccessKind, AddressSetStats, Bucket, Coverage, CpuCount, DataProfile, FieldCount,
    FunctionCount, HardwareSummary, MemSource, MergedCache, Metric, OrderingStats, ProfileInfo,
    Report, SourceCount, TypeHardware, TypeKind, TypeProfile, Warning, WarningCode,
};
use reorder::ReorderBuffer;
use rustc_hash::FxHashMap;

/// How the analysis runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Records may wait this long (ns) behind the newest record for older ones from slower
    /// CPUs (see [`reorder`]).
    pub reorder_window_ns: u64,
    /// At most this many records wait in the reorder buffer.
    pub reorder_capacity: usize,
    /// Read and decode the records on a second thread while this one replays them, when the
    /// machine has more than one CPU. The report is the same either way.
    pub two_threads: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            reorder_window_ns: 2_000_000_000,
            reorder_capacity: 1 << 20,
            two_threads: true,
        }
    }
}

/// Analyzes a whole profile with its own kallsyms snapshot.
///
/// # Errors
/// The first problem found while reading the records (see [`Profile::records`]): the
/// records are read as they are analyzed, so a corrupt chunk ends the analysis without a
/// report.
pub fn analyze(profile: &Profile, options: &Options) -> Result<Report, ProfileError> {
    let symbols = profile_kallsyms(profile);
    analyze_with(profile, &symbols, options)
}

/// The profile's kallsyms snapshot, with the per-CPU section its header places: see
/// [`place_percpu_section`].
#[must_use]
pub fn profile_kallsyms(profile: &Profile) -> crate::symbols::Kallsyms {
    let mut kallsyms = crate::symbols::Kallsyms::parse(profile.kallsyms());
    place_percpu_section(&mut kallsyms, profile, None);
    kallsyms
}

/// Places the per-CPU section the profile's header gives (see [`crate::percpu_section`]) in
/// `kallsyms`, the profile's snapshot, where it lists none; its variables are named from
/// `btf`, or from the profile's own BTF when `btf` is `None`. A BTF that does not parse
/// leaves the section unnamed: its accesses count as `percpu:(static)`.
pub fn place_percpu_section(
    kallsyms: &mut crate::symbols::Kallsyms,
    profile: &Profile,
    btf: Option<&crate::btf::Btf>,
) {
    let Some(section) = profile.header().percpu_section else {
        return;
    };
    let layout = match btf {
        Some(btf) => btf.percpu_layout(),
        None => profile
            .btf()
            .and_then(|bytes| crate::btf::Btf::parse(bytes).ok())
            .map(|btf| btf.percpu_layout())
            .unwrap_or_default(),
    };
    kallsyms.place_percpu_section(section.start..section.end, &layout);
}

/// Analyzes a whole profile with the given symbols.
///
/// # Errors
/// As [`analyze`].
pub fn analyze_with(
    profile: &Profile,
    symbols: &dyn SymbolSource,
    options: &Options,
) -> Result<Report, ProfileError> {
    analyze_with_progress(profile, symbols, options, &mut |_| {})
}

/// How far an analysis has come: records read of those the profile declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Records analyzed so far.
    pub records_done: u64,
    /// Records in the profile (its End section's count).
    pub records_total: u64,
}

/// [`analyze_with`] calls `progress` after this many records, so that a front end can show
/// progress without a call per record.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// [`analyze_with`], telling `progress` how far it has come: before the first record (with
/// the total), every [`PROGRESS_EVERY`] records, and after the last.
///
/// # Errors
/// As [`analyze`].
pub fn analyze_with_progress(
    profile: &Profile,
    symbols: &dyn SymbolSource,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ProfileError> {
    analyze_inner(profile, symbols, options, None, progress)
}

/// [`analyze_with_progress`] with the miss classification and working-set views
/// ([`Report::misses`], [`Report::working_set`]; see [`crate::views`]): the main pass also
/// records object lifetimes and slab samples, and the views are computed after it.
///
/// # Errors
/// As [`analyze`].
pub fn analyze_views(
    profile: &Profile,
    symbols: &dyn SymbolSource,
    options: &Options,
    views: &crate::views::ViewOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ProfileError> {
    analyze_inner(profile, symbols, options, Some(views), progress)
}

fn analyze_inner(
    profile: &Profile,
    symbols: &dyn SymbolSource,
    options: &Options,
    views: Option<&crate::views::ViewOptions>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ProfileError> {
    let mut analyzer = Analyzer::new(profile.header(), symbols, options);
    analyzer.set_page_owners(profile.page_owners());
    analyzer.state.histories = Some(Box::default());
    if profile.version() >= 2 {
        analyzer.records_in_time_order();
    }
    if views.is_some() {
        analyzer.record_views();
    }
    let mut now = Progress {
        records_done: 0,
        records_total: profile.record_count(),
    };
    progress(now);
    let two_threads =
        options.two_threads && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if two_threads {
        replay_in_two_threads(profile, &mut analyzer, options, &mut now, progress)?;
    } else {
        let mut records = profile.records();
        while let Some(pushed) =
            records.next_view_with(|header, record| analyzer.push_view(header, record))
        {
            pushed?;
            analyzer.prefetch_next(records.upcoming());
            now.records_done += 1;
            if now.records_done.is_multiple_of(PROGRESS_EVERY) {
                progress(now);
            }
        }
    }
    progress(now);
    let collected = analyzer
        .state
        .histories
        .take()
        .filter(|_| analyzer.saw_histories());
    let (mut report, sampled, recorded) = analyzer.finish_with_views();
    let histories = collected.map(|c| crate::histories::assemble_from(*c, profile, symbols));
    if let Some(h) = histories.as_ref().filter(|h| !h.histories.is_empty()) {
        report.histories = Some(crate::histories::report(h, symbols, Some(&sampled)));
        crate::histories::apply_bounces(&mut report.data_profile, h);
    }
    if let (Some(views), Some(recorded)) = (views, recorded) {
        crate::views::compute(
            &mut report,
            &recorded,
            histories.as_ref(),
            profile.header(),
            symbols,
            views,
        );
    }
    Ok(report)
}

/// Records the front of a two-thread analysis reads before it hands their items over.
const FORWARD_BATCH: u64 = 4096;

/// Batches handed over and not yet replayed, at most: the front reads ahead this far.
const FORWARD_QUEUE: usize = 8;

/// The analysis on two threads: one reads the records, decodes the samples and counts (an
/// [`Analyzer`] that forwards instead of replaying), the other (this one) replays what it
/// forwards through `analyzer`, in the same order, so the report is the one a single thread
/// gives. Memory stays bounded: the front waits when [`FORWARD_QUEUE`] batches are queued.
fn replay_in_two_threads(
    profile: &Profile,
    analyzer: &mut Analyzer<'_>,
    options: &Options,
    now: &mut Progress,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), ProfileError> {
    let header = profile.header();
    let (sender, receiver) = std::sync::mpsc::sync_channel::<(Vec<Item>, u64)>(FORWARD_QUEUE);
    // The front counts samples in buckets, the profiler's among them, and collects the
    // history records when asked to.
    let profiler = analyzer.profiler.clone();
    let debugging = analyzer.debugging.clone();
    let collect_histories = analyzer.state.histories.is_some();
    let front = std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> Result<(State, Decoder), ProfileError> {
            // The front resolves nothing: it needs no symbols but dprof.ko's place.
            let mut front = Analyzer::new(header, &crate::resolve::NoSymbols, options);
            front.forward = Some(Forward::default());
            front.profiler = profiler;
            front.debugging = debugging;
            if collect_histories {
                front.state.histories = Some(Box::default());
            }
            let mut records = profile.records();
            let mut read = 0u64;
            let send = |front: &mut Analyzer<'_>, read: &mut u64| {
                let items = front
                    .forward
                    .as_mut()
                    .map(|f| std::mem::take(&mut f.items))
                    .unwrap_or_default();
                // The replay stopped only if it is gone; the error is then its own.
                let _ = sender.send((items, std::mem::take(read)));
            };
            while let Some(pushed) =
                records.next_view_with(|header, record| front.push_view(header, record))
            {
                pushed?;
                read += 1;
                if read == FORWARD_BATCH {
                    send(&mut front, &mut read);
                }
            }
            send(&mut front, &mut read);
            Ok((front.state, front.decoder))
        });
        for (items, read) in receiver {
            if analyzer.in_time_order {
                // In order already: replayed where they lie, cache infos and %gs bases among
                // the events, as they were read.
                replay_steps(&mut analyzer.resolver, &mut analyzer.state, &items);
                for item in &items {
                    if let Item::Event { time, .. } = item {
                        analyzer.reorder.pass(*time);
                    }
                }
            } else {
                for item in items {
                    analyzer.apply(item);
                }
            }
            let before = now.records_done / PROGRESS_EVERY;
            now.records_done += read;
            if now.records_done / PROGRESS_EVERY != before {
                progress(*now);
            }
        }
        reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })?;
    let (front, decoder) = front;
    analyzer.absorb_front(front);
    // The front decoded every instruction: typing an access by its instruction reads them.
    analyzer.decoder = decoder;
    Ok(())
}

/// What waits in the reorder buffer.
#[derive(Clone, Copy, Debug)]
enum Event {
    Alloc(SmallAlloc),
    Free(u64),
    /// Pages given back to the page allocator (`FREE_PAGES`): the module records every one,
    /// so one that ends no recorded object is not an unknown free.
    PagesFreed(u64),
    Sample(SampleAccess),
}

/// What the replay needs of an allocation (smaller than [`Alloc`]: records wait in the
/// reorder buffer by the thousand).
#[derive(Clone, Copy, Debug)]
struct SmallAlloc {
    ptr: u64,
    call_site: u64,
    cache: u64,
    bytes_alloc: u32,
    flags: u32,
}

/// What the replay needs of a sample with a data address. What does not depend on the replay
/// time (the `%gs` offset, whether the address is on the sample's stack, what the hardware
/// said) is worked out before the sample waits in the reorder buffer. Kept to 32 bytes:
/// samples wait by the thousand.
#[derive(Clone, Copy, Debug)]
struct SampleAccess {
    ip: u64,
    addr: u64,
    /// `%gs`-relative accesses: `addr - gs_base`.
    gs_offset: u64,
    /// Bytes accessed (0: unknown; the largest memory operand, `xsave`'s, is far below 64K).
    size: u16,
    kind: AccessKind,
    /// [`GS_RELATIVE`], [`ON_STACK`], [`FIRST_OF_TWO`], [`SECOND_OF_TWO`].
    flags: u8,
    /// What a hardware sampler said, packed by [`hw_bits`] (0 for software samples).
    hw: u8,
    /// Hardware latency in cycles, saturated (IBS's is 16 bits, PEBS's rarely more), when
    /// `hw` has [`HW_HAS_LATENCY`].
    latency: u16,
}

/// [`SampleAccess::flags`]: the operand is `%gs`-relative.
const GS_RELATIVE: u8 = 1;
/// [`SampleAccess::flags`]: the address is in the `THREAD_SIZE` region of the sample's `%rsp`.
const ON_STACK: u8 = 2;
/// [`SampleAccess::flags`]: the first of an instruction's two memory operands (the sample
/// counts in the coverage by the first of its operands that resolves).
const FIRST_OF_TWO: u8 = 4;
/// [`SampleAccess::flags`]: the second of them, replayed right after the first.
const SECOND_OF_TWO: u8 = 8;

impl SampleAccess {
    const fn gs_relative(&self) -> bool {
        self.flags & GS_RELATIVE != 0
    }
}

/// [`SampleAccess::hw`] bits 0-3: the [`MemSource`] index.
const HW_SOURCE_MASK: u8 = 0x0f;
/// [`SampleAccess::hw`]: the hardware said whether the access missed (the sample counts in the
/// hardware statistics).
const HW_KNOWN: u8 = 0x10;
/// [`SampleAccess::hw`]: the access missed the L1 data cache.
const HW_MISS: u8 = 0x20;
/// [`SampleAccess::hw`]: the line was modified in another core's cache.
const HW_HITM: u8 = 0x40;
/// [`SampleAccess::hw`]: `latency` is valid.
const HW_HAS_LATENCY: u8 = 0x80;

const _: () = assert!(MemSource::ALL.len() <= HW_SOURCE_MASK as usize + 1);
const _: () = assert!(std::mem::size_of::<SampleAccess>() == 32);

/// What [`SampleAccess::hw`] says about a miss, for the views.
fn miss_bit(hw: u8) -> crate::views::MissBit {
    use crate::views::MissBit;
    if hw & HW_KNOWN == 0 {
        MissBit::Unknown
    } else if hw & HW_MISS != 0 {
        MissBit::Miss
    } else {
        MissBit::Hit
    }
}

/// Packs what the hardware said into [`SampleAccess::hw`] and its latency.
fn hw_bits(hw: Option<&HwAccess>) -> (u8, u16) {
    let Some(hw) = hw else { return (0, 0) };
    let Some(miss) = hw.miss else { return (0, 0) };
    let mut bits = (hw.source.index() as u8 & HW_SOURCE_MASK) | HW_KNOWN;
    if miss {
        bits |= HW_MISS;
    }
    if hw.hitm {
        bits |= HW_HITM;
    }
    let latency = hw.latency.map_or(0, |l| {
        bits |= HW_HAS_LATENCY;
        u16::try_from(l).unwrap_or(u16::MAX)
    });
    (bits, latency)
}

/// Counts of accesses by kind, and how many of them a hardware sampler saw miss.
#[derive(Clone, Copy, Debug, Default)]
struct Rw {
    reads: u64,
    writes: u64,
    read_writes: u64,
    misses: u64,
}

impl Rw {
    #[inline]
    fn add(&mut self, kind: AccessKind) {
        match kind {
            AccessKind::Read => self.reads += 1,
            AccessKind::Write => self.writes += 1,
            AccessKind::ReadWrite => self.read_writes += 1,
        }
    }

    fn total(self) -> u64 {
        self.reads + self.writes + self.read_writes
    }

    fn merge(&mut self, other: Self) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_writes += other.read_writes;
        self.misses += other.misses;
    }

    /// Counts one sampled access.
    #[inline]
    fn add_access(&mut self, access: &SampleAccess) {
        self.add(access.kind);
        if access.hw & HW_MISS != 0 {
            self.misses += 1;
        }
    }
}

/// Hardware statistics of one type: samples with a known hit/miss status only.
#[derive(Clone, Copy, Debug, Default)]
struct HwAcc {
    samples: u64,
    misses: u64,
    hitm: u64,
    latency_samples: u64,
    latency_sum: u64,
    sources: [u64; MemSource::ALL.len()],
}

impl HwAcc {
    #[inline]
    fn add(&mut self, access: &SampleAccess) {
        let hw = access.hw;
        if hw & HW_KNOWN == 0 {
            return;
        }
        self.samples += 1;
        if hw & HW_MISS != 0 {
            self.misses += 1;
        }
        if hw & HW_HITM != 0 {
            self.hitm += 1;
        }
        if hw & HW_HAS_LATENCY != 0 {
            self.latency_samples += 1;
            self.latency_sum += u64::from(access.latency);
        }
        if let Some(n) = self.sources.get_mut(usize::from(hw & HW_SOURCE_MASK)) {
            *n += 1;
        }
    }

    fn merge(&mut self, other: &Self) {
        self.samples += other.samples;
        self.misses += other.misses;
        self.hitm += other.hitm;
        self.latency_samples += other.latency_samples;
        self.latency_sum += other.latency_sum;
        for (a, b) in self.sources.iter_mut().zip(other.sources) {
            *a += b;
        }
    }

    /// The report's view; `all_misses` is the denominator of the miss share.
    fn report(&self, all_misses: u64) -> TypeHardware {
        let ratio = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        TypeHardware {
            samples: self.samples,
            misses: self.misses,
            miss_rate: ratio(self.misses, self.samples),
            miss_share: ratio(self.misses, all_misses),
            hitm: self.hitm,
            latency_samples: self.latency_samples,
            mean_latency_cycles: (self.latency_samples > 0)
                .then(|| self.latency_sum as f64 / self.latency_samples as f64),
            sources: source_counts(&self.sources),
        }
    }
}

/// Sources with samples, most first (ties nearest first).
fn source_counts(counts: &[u64; MemSource::ALL.len()]) -> Vec<SourceCount> {
    let mut out: Vec<SourceCount> = MemSource::ALL
        .iter()
        .zip(counts)
        .filter(|(_, &n)| n > 0)
        .map(|(&source, &samples)| SourceCount { source, samples })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.source.cmp(&b.source)));
    out
}

/// Per-type accumulators.
#[derive(Clone, Debug, Default)]
struct TypeAcc {
    rw: Rw,
    hw: HwAcc,
    objects: u64,
    bounced: u64,
    allocs: u64,
    frees: u64,
    live_objects: u64,
    live_bytes: u64,
    peak_objects: u64,
    peak_bytes: u64,
    cpus: Vec<u64>,
}

/// Key of the (type, offset, instruction) aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AccessKey {
    type_id: u32,
    offset: u64,
    ip: u64,
}

impl TableKey for AccessKey {
    /// Type ids index the interned types, so `u32::MAX` is none.
    const VACANT: Self = Self {
        type_id: u32::MAX,
        offset: u64::MAX,
        ip: u64::MAX,
    };

    #[inline]
    fn hash(self) -> u64 {
        const FIB: u64 = 0x9e37_79b9_7f4a_7c15;
        let h = (u64::from(self.type_id) ^ self.offset.rotate_left(20)).wrapping_mul(FIB);
        (h ^ self.ip).wrapping_mul(FIB)
    }
}

/// What the (type, offset, instruction) aggregation counts: kept to 40 bytes, so that a
/// bucket of its table is one cache line (the table is half empty, and with millions of
/// samples each one's bucket is likely a miss). What hardware samplers add is apart.
#[derive(Clone, Copy, Debug)]
struct AccessAcc {
    rw: Rw,
    size: u32,
    /// Index of its [`AccessHw`] in `State::access_hw`; [`NO_HW`] until a hardware sample
    /// with a hit/miss status comes.
    hw: u32,
}

impl Default for AccessAcc {
    fn default() -> Self {
        Self {
            rw: Rw::default(),
            size: 0,
            hw: NO_HW,
        }
    }
}

/// [`AccessAcc::hw`] of an access no hardware sampler described.
const NO_HW: u32 = u32::MAX;

const _: () = assert!(std::mem::size_of::<(AccessKey, AccessAcc)>() == 64);

/// What hardware samplers said of one (type, offset, instruction).
#[derive(Clone, Copy, Debug, Default)]
struct AccessHw {
    /// Samples with a hardware hit/miss status.
    samples: u64,
    latency_samples: u64,
    latency_sum: u64,
    /// Of the hardware samples, by where their data came from ([`MemSource::ALL`] order).
    sources: [u32; MemSource::ALL.len()],
}

/// Touch state of a non-slab instance (global symbol, per-CPU copy, stack).
#[derive(Clone, Copy, Debug)]
struct Instance {
    first_cpu: u32,
    bounced: bool,
}

/// Instance owner of globals and stacks: owned by no CPU.
const NO_OWNER: u32 = u32::MAX;

/// Largest CPU number tracked per type (CPU numbers come from the profile, below `nr_cpu_ids`).
const MAX_TRACKED_CPU: u32 = 1 << 16;

/// Streaming analysis: [`Analyzer::push`] records in file order, then [`Analyzer::finish`].
pub struct Analyzer<'s> {
    header: ProfileHeader,
    options: Options,
    decoder: Decoder,
    resolver: Resolver<'s>,
    reorder: ReorderBuffer<(u32, Event)>,
    /// The records come merged in time order (format version 2 and later): events skip the
    /// reorder buffer ([`Analyzer::records_in_time_order`]).
    in_time_order: bool,
    /// `(time, cpu, event)` that left the reorder buffer, to replay (see [`replay_batch`]).
    batch: Vec<(u64, u32, Event)>,
    state: State,
    /// Family and model of the profiled CPU when it is AMD: the IBS decoder's quirks.
    amd_cpu: Option<dprof_ibs::CpuModel>,
    /// When this analyzer is the front of a two-thread analysis ([`analyze_inner`]): what
    /// the replay needs, in record order, instead of replaying it here.
    forward: Option<Forward>,
    /// The profiler's code (dprof.ko, the kernel's perf events): samples there are the
    /// profiler's own ([`Bucket::Profiler`]), as are those of the collector's process (the
    /// header's `collector_pid`).
    profiler: ProfilerCode,
    /// The kernel's debugging code: samples there are no workload's data accesses
    /// ([`Bucket::KernelDebugging`]). It also gives the kernel's stack size.
    debugging: DebuggingCode,
}

/// What the front of a two-thread analysis (reading, decoding, counting) hands the replay
/// (address set, resolution, aggregation), in record order.
#[derive(Clone, Copy, Debug)]
enum Item {
    /// An event for the reorder buffer.
    Event { time: u64, cpu: u32, event: Event },
    /// A cache's name and geometry.
    CacheInfo(dprof_abi::CacheInfo),
    /// A CPU's `%gs` base, when it is new.
    GsBase { cpu: u32, gs_base: u64 },
}

/// Items waiting to be sent, and the `%gs` bases already sent.
#[derive(Debug, Default)]
struct Forward {
    items: Vec<Item>,
    gs_bases: Vec<u64>,
}

/// Everything the replay updates (apart from the resolver).
#[derive(Default)]
struct State {
    buckets: [u64; Bucket::ALL.len()],
    types: Vec<TypeAcc>,
    accesses: Table<AccessKey, AccessAcc>,
    access_hw: Vec<AccessHw>,
    instances: FxHashMap<(u32, u64), Instance>,
    unknown_ips: FxHashMap<u64, Rw>,
    peak_live: u64,
    live: u64,
    records: u64,
    first_time: Option<u64>,
    last_time: Option<u64>,
    lost: u64,
    gs_relative_samples: u64,
    /// Hardware samples of memory operations (resolved or not).
    hw_samples: u64,
    /// Of them, those whose data address came from the hardware.
    hw_addresses: u64,
    /// Of those, the ones whose decoded instruction gave another address.
    hw_address_mismatches: u64,
    /// `SAMPLER_KIND_*` bits (1 << kind) of the hardware samplers seen.
    hw_kinds: u8,
    /// History records seen (they are analysed apart, see [`crate::histories`]).
    history_records: u64,
    /// The history records and cache descriptions, for [`crate::histories::assemble_from`],
    /// when collecting them (a profile's analysis does: one pass over the records, not two).
    histories: Option<Box<crate::histories::Collected>>,
    /// Experiment records, in file order: few (two per experiment), analysed at the end (see
    /// [`crate::causal`]) rather than in a second pass over the records.
    experiments: Vec<dprof_format::ExperimentRecord>,
    /// What the miss classification and working-set views need; `None` unless asked for
    /// ([`Analyzer::record_views`]).
    views: Option<Box<crate::views::Recorded>>,
    /// The first operand of a two-operand sample, replayed, whose second comes next.
    first_of_two: Option<FirstOfTwo>,
    /// Samples whose second operand was replayed.
    two_location_samples: u64,
}

/// See [`counts_in_buckets`].
#[derive(Clone, Copy, Debug)]
struct FirstOfTwo {
    cpu: u32,
    ip: u64,
    /// It resolved, and counted in its bucket.
    counted: bool,
}

impl std::fmt::Debug for Analyzer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("records", &self.state.records)
            .field("buffered", &self.reorder.len())
            .field("resolver", &self.resolver)
            .finish_non_exhaustive()
    }
}

impl<'s> Analyzer<'s> {
    /// An analyzer for a profile with this header.
    #[must_use]
    pub fn new(header: &ProfileHeader, symbols: &'s dyn SymbolSource, options: &Options) -> Self {
        let mut resolver = Resolver::new(symbols);
        let debugging = resolver.debugging_code().clone();
        resolver.set_merged_caches(&header.merged_caches);
        resolver.set_memory_layout(header.memory_layout);
        resolver.set_kernel_image(&header.kernel_image);
        Self {
            header: header.clone(),
            options: *options,
            decoder: Decoder::new(),
            resolver,
            reorder: ReorderBuffer::new(
                header.online_cpus as usize,
                options.reorder_window_ns,
                options.reorder_capacity,
            ),
            in_time_order: false,
            batch: Vec::new(),
            state: State::default(),
            forward: None,
            profiler: symbols.profiler_code(),
            debugging,
            amd_cpu: header
                .cpu_id
                .as_ref()
                .filter(|id| matches!(id.vendor.as_str(), "AuthenticAMD" | "HygonGenuine"))
                .map(|id| dprof_ibs::CpuModel {
                    family: id.family,
                    model: id.model,
                }),
        }
    }

    /// Feeds one record, in file order.
    pub fn push(&mut self, header: &RecordHeader, record: &Record) {
        if let Record::AccessSample(sample) = record {
            // Software samples, the common case, carry nothing from the hardware: skip
            // building an empty answer.
            let hw = if sample.sampler == SAMPLER_KIND_SOFTWARE {
                None
            } else {
                HwAccess::of_on(sample, self.amd_cpu)
            };
            self.push_sample(header, sample, hw);
        } else {
            self.push_other(header, record);
        }
    }

    /// [`Analyzer::push`] of a record as [`dprof_format::Records::next_view_with`] gives
    /// it: access samples are read in place.
    #[inline]
    pub fn push_view(&mut self, header: &RecordHeader, record: RecordView<'_>) {
        match record {
            RecordView::AccessSample(view) => {
                let hw = if view.sampler() == SAMPLER_KIND_SOFTWARE {
                    None
                } else {
                    HwAccess::of_on(&view.to_sample(), self.amd_cpu)
                };
                self.push_sample(header, &view, hw);
            }
            RecordView::Decoded(record) => self.push(header, record),
        }
    }

    /// Prefetches the decoder's entry for the next record, when it is an access sample
    /// (`upcoming`: the bytes from its start, see [`dprof_format::Records::upcoming`]), so
    /// that its miss overlaps this record's work. Unchecked bytes: only a hint.
    #[inline]
    pub fn prefetch_next(&self, upcoming: &[u8]) {
        let Ok(header) = RecordHeader::decode(upcoming) else {
            return;
        };
        if !matches!(
            RecordKind::from_u16(header.kind),
            Some(RecordKind::AccessSample | RecordKind::IbsSample)
        ) {
            return;
        }
        // The sample's payload starts with its ip.
        if let Some(ip) = upcoming
            .get(RECORD_HEADER_SIZE..RECORD_HEADER_SIZE + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
        {
            self.decoder.prefetch(ip);
        }
    }

    /// Counts a record's time.
    #[inline]
    fn count_record(&mut self, t: u64) {
        let st = &mut self.state;
        st.records += 1;
        st.first_time = Some(st.first_time.map_or(t, |f| f.min(t)));
        st.last_time = Some(st.last_time.map_or(t, |l| l.max(t)));
    }

    /// Feeds an access sample; `hw` is what its hardware sampler said.
    #[inline]
    fn push_sample<S: SampleFields>(
        &mut self,
        header: &RecordHeader,
        sample: &S,
        hw: Option<HwAccess>,
    ) {
        self.count_record(header.time_ns);
        let (first, second) = self.sample_events(header.cpu, sample, hw);
        if let Some(event) = first {
            self.reorder_push(header, event);
        }
        if let Some(event) = second {
            self.reorder_push(header, event);
        }
    }

    /// Hands an event to the reorder buffer, replaying what leaves it.
    #[inline]
    fn reorder_push(&mut self, header: &RecordHeader, event: Event) {
        if let Some(forward) = &mut self.forward {
            forward.items.push(Item::Event {
                time: header.time_ns,
                cpu: header.cpu,
                event,
            });
            return;
        }
        self.reorder_event(header.time_ns, header.cpu, event);
    }

    /// Says that the records will come merged in time order, as [`Profile::records`] yields
    /// a version 2 profile's: each CPU's records in the order its ring holds them (the order
    /// they happened on that CPU), the CPUs merged by time. The reorder buffer would then
    /// only cost time; events are replayed in arrival order, and any older than one before
    /// are still counted as late. Call before the first record.
    pub fn records_in_time_order(&mut self) {
        self.in_time_order = true;
    }

    /// [`Analyzer::reorder_push`] here, not forwarded.
    #[inline]
    fn reorder_event(&mut self, time: u64, cpu: u32, event: Event) {
        if self.in_time_order {
            // Batched: the replay prefetches ahead within a batch. %gs bases take effect as
            // they are read, ahead of the batch, as they do ahead of the reorder buffer; a
            // cache's description replays the batch first (see `push_other`).
            self.reorder.pass(time);
            self.batch.push((time, cpu, event));
            if self.batch.len() >= MAX_BATCH {
                replay_batch(&mut self.resolver, &mut self.state, &mut self.batch);
            }
            return;
        }
        let (resolver, state, batch) = (&mut self.resolver, &mut self.state, &mut self.batch);
        self.reorder
            .push(cpu, time, (cpu, event), |time, &(cpu, event)| {
                batch.push((time, cpu, event));
                if batch.len() >= MAX_BATCH {
                    replay_batch(resolver, state, batch);
                }
            });
        // Replayed before the next record is read, as if replayed as they left.
        if !self.batch.is_empty() {
            replay_batch(&mut self.resolver, &mut self.state, &mut self.batch);
        }
    }

    /// Replays everything the reorder buffer still holds.
    fn replay_rest(&mut self) {
        let (resolver, state, batch) = (&mut self.resolver, &mut self.state, &mut self.batch);
        self.reorder.finish(|time, &(cpu, event)| {
            batch.push((time, cpu, event));
            if batch.len() >= MAX_BATCH {
                replay_batch(resolver, state, batch);
            }
        });
        replay_batch(&mut self.resolver, &mut self.state, &mut self.batch);
    }

    /// Feeds a record other than an access sample.
    fn push_other(&mut self, header: &RecordHeader, record: &Record) {
        self.count_record(header.time_ns);
        let st = &mut self.state;
        let event = match record {
            Record::CacheInfo(info) => {
                if let Some(collected) = st.histories.as_deref_mut() {
                    collected.push(header, record);
                }
                if let Some(forward) = &mut self.forward {
                    forward.items.push(Item::CacheInfo(*info));
                } else {
                    // A cache's address can be reused by a new cache: the events read before
                    // its description are replayed under the old one.
                    if self.in_time_order {
                        replay_batch(&mut self.resolver, &mut self.state, &mut self.batch);
                    }
                    self.resolver.cache_info(info);
                }
                return;
            }
            Record::Lost(lost) => {
                st.lost = st.lost.saturating_add(lost.count);
                return;
            }
            Record::Alloc(a) => Event::Alloc(SmallAlloc {
                ptr: a.ptr,
                call_site: a.call_site,
                cache: a.cache,
                bytes_alloc: a.bytes_alloc,
                flags: a.flags,
            }),
            Record::Free(free) if free.flags & FREE_PAGES != 0 => Event::PagesFreed(free.ptr),
            Record::Free(free) => Event::Free(free.ptr),
            // Histories have their own analysis (the data flow view).
            Record::HistoryStart(_)
            | Record::HistoryArm(_)
            | Record::HistoryHit(_)
            | Record::HistoryEnd(_) => {
                st.history_records += 1;
                if let Some(collected) = st.histories.as_deref_mut() {
                    collected.push(header, record);
                }
                return;
            }
            // Causal experiments have their own analysis (the causal view).
            Record::ExperimentStart(_) | Record::ExperimentEnd(_) => {
                st.experiments
                    .extend(dprof_format::ExperimentRecord::of(record));
                return;
            }
            // Taken by `push`.
            Record::AccessSample(_) => return,
        };
        self.reorder_push(header, event);
    }

    /// The events of a sample: one per memory location its instruction touched (a hardware
    /// sampler names the one it sampled), none when it touched none this analysis can name
    /// (counted in its bucket here).
    ///
    /// A hardware sample's data address is the hardware's; the instruction is still decoded
    /// for the access size and read/write, and a decoded address that differs is counted
    /// (PEBS reports registers as they were after the load, so some differences are
    /// expected). An IBS op that is neither a load nor a store accessed no memory.
    #[inline]
    fn sample_events<S: SampleFields>(
        &mut self,
        cpu: u32,
        sample: &S,
        hw: Option<HwAccess>,
    ) -> (Option<Event>, Option<Event>) {
        if sample.flags() & SAMPLE_USER != 0 {
            self.state.buckets[Bucket::UserMode.index()] += 1;
            return (None, None);
        }
        // dprof's own work is not the workload's: dprof.ko's probes and rings, the perf
        // events code its samplers and tracepoint events run, and the kernel working for the
        // collector (its reads, its perf system calls).
        if self.profiler.contains(sample.ip())
            || self.header.config.collector_pid == Some(sample.pid())
        {
            self.state.buckets[Bucket::Profiler.index()] += 1;
            return (None, None);
        }
        // Sanitizers and lock checking: the kernel checking itself, not the workload.
        if !self.debugging.is_empty() && self.debugging.contains(sample.ip()) {
            self.state.buckets[Bucket::KernelDebugging.index()] += 1;
            return (None, None);
        }
        let gs_base = sample.gs_base();
        match &mut self.forward {
            Some(forward) => forward.gs_base(cpu, gs_base),
            None => self.resolver.learn_gs_base(cpu, gs_base),
        }
        if let Some(h) = &hw {
            if !h.memory_op {
                self.state.buckets[Bucket::NoMemoryOperand.index()] += 1;
                return (None, None);
            }
            self.state.hw_samples += 1;
            self.state.hw_kinds |= 1u8.checked_shl(u32::from(sample.sampler())).unwrap_or(0);
        }
        let hw_addr = hw.as_ref().and_then(|h| h.addr);
        let outcome = self.decoder.access(sample);
        let (first, second) = match (outcome.accesses(), hw_addr) {
            // The hardware sampled one access: the operand at its address, or the first.
            (decoded @ [first, ..], Some(addr)) => {
                self.state.hw_addresses += 1;
                let sampled = decoded.iter().find(|a| a.addr == addr);
                if sampled.is_none() {
                    self.state.hw_address_mismatches += 1;
                }
                let access = sampled.unwrap_or(first);
                (MemAccess { addr, ..*access }, None)
            }
            ([only], None) => (*only, None),
            ([first, second, ..], None) => (*first, Some(*second)),
            ([], Some(addr)) => {
                self.state.hw_addresses += 1;
                let access = MemAccess {
                    addr,
                    size: hw.as_ref().and_then(|h| h.size).unwrap_or(0),
                    kind: hw.as_ref().and_then(|h| h.kind).unwrap_or(AccessKind::Read),
                    gs_relative: false,
                };
                (access, None)
            }
            ([], None) => {
                if let DecodeOutcome::None(why) = outcome {
                    self.state.buckets[why.bucket().index()] += 1;
                }
                return (None, None);
            }
        };
        if first.gs_relative {
            self.state.gs_relative_samples += 1;
        }
        let rsp = sample.reg(dprof_abi::reg::RSP);
        let region = !(self.debugging.thread_size() - 1);
        let (hw, latency) = hw_bits(hw.as_ref());
        let event = |access: MemAccess, part: u8| {
            let on_stack = rsp != 0 && access.addr & region == rsp & region;
            Event::Sample(SampleAccess {
                ip: sample.ip(),
                addr: access.addr,
                gs_offset: access.addr.wrapping_sub(gs_base),
                size: u16::try_from(access.size).unwrap_or(u16::MAX),
                kind: access.kind,
                flags: part
                    | if access.gs_relative { GS_RELATIVE } else { 0 }
                    | if on_stack { ON_STACK } else { 0 },
                hw,
                latency,
            })
        };
        match second {
            None => (Some(event(first, 0)), None),
            Some(second) => (
                Some(event(first, FIRST_OF_TWO)),
                Some(event(second, SECOND_OF_TWO)),
            ),
        }
    }

    /// The replay's side of a two-thread analysis: what the front forwarded, in its order.
    fn apply(&mut self, item: Item) {
        match item {
            Item::Event { time, cpu, event } => self.reorder_event(time, cpu, event),
            Item::CacheInfo(info) => self.resolver.cache_info(&info),
            Item::GsBase { cpu, gs_base } => self.resolver.learn_gs_base(cpu, gs_base),
        }
    }

    /// Takes over what the front of a two-thread analysis counted: records, times, lost
    /// records, the samples it put in buckets, hardware counts, histories and experiments.
    fn absorb_front(&mut self, front: State) {
        let st = &mut self.state;
        for (mine, theirs) in st.buckets.iter_mut().zip(front.buckets) {
            *mine += theirs;
        }
        st.records = front.records;
        st.first_time = front.first_time;
        st.last_time = front.last_time;
        st.lost = front.lost;
        st.gs_relative_samples = front.gs_relative_samples;
        st.hw_samples = front.hw_samples;
        st.hw_addresses = front.hw_addresses;
        st.hw_address_mismatches = front.hw_address_mismatches;
        st.hw_kinds = front.hw_kinds;
        st.history_records = front.history_records;
        st.histories = front.histories;
        st.experiments = front.experiments;
    }

    /// The owners of the direct-map pages the samples touched (the profile's `PageOwners`
    /// section; see [`Resolver::set_page_owners`]). Call before the first record.
    pub fn set_page_owners(&mut self, owners: &dprof_format::PageOwners) {
        self.resolver.set_page_owners(owners);
    }

    /// Also records, from now on, what the miss classification and working-set views need:
    /// every object's lifetime and every sample that resolves to a slab object (see
    /// [`crate::views`]). Call before the first record.
    pub fn record_views(&mut self) {
        self.state.views = Some(Box::default());
    }

    /// Replays what is still buffered and builds the report.
    #[must_use]
    pub fn finish(self) -> Report {
        self.finish_with_accesses().0
    }

    /// [`Analyzer::finish_with_accesses`], also handing back what [`Analyzer::record_views`]
    /// recorded (`None` unless it was called).
    #[must_use]
    pub fn finish_with_views(
        mut self,
    ) -> (Report, SampledAccesses, Option<crate::views::Recorded>) {
        // What the reorder buffer still holds is replayed with recording on.
        self.replay_rest();
        let span = self.state.first_time.zip(self.state.last_time);
        let recorded = self.state.views.take().map(|mut r| {
            // The views of live objects cover what the slab events cover: a causal profile's
            // experiments, which trace no allocation, would otherwise dilute the means.
            r.span = r.events_span().or(span);
            r.type_names = self
                .resolver
                .types()
                .iter()
                .map(|(_, info)| info.name.clone())
                .collect();
            *r
        });
        let (report, sampled) = self.finish_with_accesses();
        (report, sampled, recorded)
    }

    /// [`Analyzer::finish`], also handing back the sampled accesses by (type, instruction,
    /// offset), for path traces.
    #[must_use]
    pub fn finish_with_accesses(mut self) -> (Report, SampledAccesses) {
        self.replay_rest();
        let report = build_report(&self);
        let mut sampled = SampledAccesses::new(self.state.hw_samples > 0);
        let types = self.resolver.types();
        for (key, acc) in self.state.accesses.iter() {
            let Some(info) = types.get(TypeId(key.type_id)) else {
                continue;
            };
            let hw = self
                .state
                .access_hw
                .get(acc.hw as usize)
                .copied()
                .unwrap_or_default();
            sampled.insert(
                &info.name,
                key.ip,
                key.offset,
                AccessStats {
                    samples: acc.rw.total(),
                    reads: acc.rw.reads,
                    writes: acc.rw.writes,
                    read_writes: acc.rw.read_writes,
                    hw_samples: hw.samples,
                    misses: acc.rw.misses,
                    latency_samples: hw.latency_samples,
                    latency_sum: hw.latency_sum,
                    sources: hw.sources.map(u64::from),
                },
            );
        }
        (report, sampled)
    }

    /// Whether a history record was pushed (the profile was collected with histories).
    #[must_use]
    pub const fn saw_histories(&self) -> bool {
        self.state.history_records > 0
    }
}

impl Forward {
    /// Forwards `cpu`'s `%gs` base when it differs from the last one forwarded.
    #[inline]
    fn gs_base(&mut self, cpu: u32, gs_base: u64) {
        let i = cpu as usize;
        if self.gs_bases.get(i) == Some(&gs_base) {
            return;
        }
        if self.gs_bases.len() <= i {
            self.gs_bases.resize(i + 1, 0);
        }
        self.gs_bases[i] = gs_base;
        self.items.push(Item::GsBase { cpu, gs_base });
    }
}

fn type_acc(types: &mut Vec<TypeAcc>, id: TypeId) -> &mut TypeAcc {
    let i = id.0 as usize;
    if i >= types.len() {
        types.resize_with(i + 1, TypeAcc::default);
    }
    // Just resized to hold `i`.
    let last = types.len() - 1;
    &mut types[i.min(last)]
}

fn on_gone(types: &mut [TypeAcc], type_id: TypeId, size: u32, freed: bool) {
    if let Some(acc) = types.get_mut(type_id.0 as usize) {
        acc.live_objects = acc.live_objects.saturating_sub(1);
        acc.live_bytes = acc.live_bytes.saturating_sub(u64::from(size));
        if freed {
            acc.frees += 1;
        }
    }
}

/// Events replayed at once at most (the reorder buffer lets them go by the hundred when its
/// watermark moves).
const MAX_BATCH: usize = 256;

/// Replay runs this many events ahead of itself with [`Resolver::prefetch`] of the page
/// bucket, then of the page's entry: the replay's cost is cache misses on the address set,
/// one chain of dependent misses per record, and prefetching overlaps those of a few records.
const PREFETCH_FAR: usize = 8;
const PREFETCH_NEAR: usize = 4;
/// Then, for a sample that will land in a slab object (its page and entry are in the cache by
/// now), the aggregation's bucket of its (type, offset, instruction) and its type's counters.
const PREFETCH_KEY: usize = 2;

/// The address an event will look up in the address set.
#[inline]
fn lookup_addr(event: &Event) -> Option<u64> {
    match *event {
        Event::Sample(ref a) if !a.gs_relative() => Some(a.addr),
        Event::Sample(_) => None,
        Event::Free(ptr) | Event::PagesFreed(ptr) => Some(ptr),
        Event::Alloc(ref a) => Some(a.ptr),
    }
}

/// Something the replay walks through in order: an event (with its time and CPU), or, for
/// what the front of a two-thread analysis forwards, what the resolver learns between events.
trait ReplayStep {
    /// The event, if this is one.
    fn event(&self) -> Option<&Event>;
    /// Replays it.
    fn replay(&self, resolver: &mut Resolver<'_>, st: &mut State);
}

impl ReplayStep for (u64, u32, Event) {
    #[inline]
    fn event(&self) -> Option<&Event> {
        Some(&self.2)
    }

    #[inline]
    fn replay(&self, resolver: &mut Resolver<'_>, st: &mut State) {
        replay(resolver, st, self.0, self.1, &self.2);
    }
}

impl ReplayStep for Item {
    #[inline]
    fn event(&self) -> Option<&Event> {
        match self {
            Self::Event { event, .. } => Some(event),
            Self::CacheInfo(_) | Self::GsBase { .. } => None,
        }
    }

    #[inline]
    fn replay(&self, resolver: &mut Resolver<'_>, st: &mut State) {
        match *self {
            Self::Event {
                time,
                cpu,
                ref event,
            } => replay(resolver, st, time, cpu, event),
            Self::CacheInfo(ref info) => resolver.cache_info(info),
            Self::GsBase { cpu, gs_base } => resolver.learn_gs_base(cpu, gs_base),
        }
    }
}

/// Replays `steps` in order, prefetching ahead (a prefetch is a hint: the address set may
/// change before its record is replayed, and then the lookup just misses).
fn replay_steps<T: ReplayStep>(resolver: &mut Resolver<'_>, st: &mut State, steps: &[T]) {
    let addr_at = |i: usize| steps.get(i).and_then(T::event).and_then(lookup_addr);
    for i in 0..PREFETCH_FAR {
        if let Some(addr) = addr_at(i) {
            resolver.prefetch(addr, false);
        }
    }
    for (i, step) in steps.iter().enumerate() {
        if let Some(addr) = addr_at(i + PREFETCH_FAR) {
            resolver.prefetch(addr, false);
        }
        if let Some(addr) = addr_at(i + PREFETCH_NEAR) {
            resolver.prefetch(addr, true);
        }
        if let Some(Event::Sample(a)) = steps.get(i + PREFETCH_KEY).and_then(T::event) {
            if let Some(hit) = (!a.gs_relative())
                .then(|| resolver.objects().find(a.addr))
                .flatten()
            {
                st.accesses.prefetch(AccessKey {
                    type_id: hit.type_id.0,
                    offset: hit.offset,
                    ip: a.ip,
                });
                if let Some(acc) = st.types.get(hit.type_id.0 as usize) {
                    crate::prefetch(acc);
                }
            }
        }
        step.replay(resolver, st);
    }
}

/// [`replay_steps`] of `batch`, which it empties.
fn replay_batch(resolver: &mut Resolver<'_>, st: &mut State, batch: &mut Vec<(u64, u32, Event)>) {
    replay_steps(resolver, st, batch);
    batch.clear();
}

/// One record in time order.
#[inline]
fn replay(resolver: &mut Resolver<'_>, st: &mut State, time: u64, cpu: u32, event: &Event) {
    match *event {
        Event::Alloc(a) => {
            let alloc = Alloc {
                ptr: a.ptr,
                call_site: a.call_site,
                cache: a.cache,
                bytes_alloc: a.bytes_alloc,
                flags: a.flags,
                ..Alloc::default()
            };
            replay_alloc(resolver, st, time, cpu, &alloc);
        }
        Event::Free(ptr) | Event::PagesFreed(ptr) => {
            let gone = if matches!(event, Event::Free(_)) {
                resolver.free_entry(ptr)
            } else {
                resolver.free_pages_entry(ptr)
            };
            if let Some(gone) = gone {
                st.live = st.live.saturating_sub(1);
                on_gone(&mut st.types, gone.type_id, gone.size, true);
                if let Some(views) = st.views.as_deref_mut() {
                    // The freed slot still holds the object: nothing was inserted since.
                    if let Some(obj) = resolver.objects().get(gone.slot) {
                        views.end(obj.serial, time);
                    }
                }
            }
        }
        Event::Sample(access) => replay_sample(resolver, st, cpu, &access),
    }
}

fn replay_alloc(resolver: &mut Resolver<'_>, st: &mut State, time: u64, cpu: u32, alloc: &Alloc) {
    let (types, views) = (&mut st.types, &mut st.views);
    let mut replaced = 0u64;
    let Some((slot, type_id)) = resolver.alloc(alloc, time, cpu, |old| {
        on_gone(types, old.type_id, old.size, false);
        replaced += 1;
        if let Some(views) = views.as_deref_mut() {
            views.end(old.serial, time);
        }
    }) else {
        return;
    };
    if let Some(views) = st.views.as_deref_mut() {
        if let Some(obj) = resolver.objects().get(slot) {
            views.alloc(obj, alloc.call_site);
        }
    }
    st.live = st.live.saturating_sub(replaced) + 1;
    st.peak_live = st.peak_live.max(st.live);
    let acc = type_acc(&mut st.types, type_id);
    acc.allocs += 1;
    acc.live_objects += 1;
    acc.live_bytes += u64::from(alloc.bytes_alloc);
    acc.peak_objects = acc.peak_objects.max(acc.live_objects);
    acc.peak_bytes = acc.peak_bytes.max(acc.live_bytes);
}

/// Hands a sample that resolved to the object in `slot` to the views, when recording.
#[inline]
fn record_slab_sample(
    resolver: &Resolver<'_>,
    st: &mut State,
    slot: crate::resolve::Slot,
    offset: u64,
    cpu: u32,
    access: &SampleAccess,
) {
    if let Some(views) = st.views.as_deref_mut() {
        if let Some(obj) = resolver.objects().get(slot) {
            let miss = miss_bit(access.hw);
            views.sample(obj, offset, cpu, access.ip, access.size, access.kind, miss);
        }
    }
}

/// Where a sample that resolved landed: its bucket, type, offset and instance (its key, and
/// the CPU that owns it or [`NO_OWNER`]; none for slab objects, whose touches say it).
type Placed = (Bucket, TypeId, u64, Option<(u64, u32)>);

/// Where a resolution outside the address set landed.
#[inline]
fn instance_of(resolution: Resolution) -> Option<Placed> {
    Some(match resolution {
        Resolution::Global {
            type_id,
            symbol,
            offset,
        } => (Bucket::Global, type_id, offset, Some((symbol, NO_OWNER))),
        Resolution::Percpu {
            type_id,
            owner_cpu,
            offset,
        } => (
            Bucket::Percpu,
            type_id,
            offset,
            Some((u64::from(owner_cpu), owner_cpu)),
        ),
        Resolution::Stack {
            type_id,
            base,
            offset,
        } => (Bucket::Stack, type_id, offset, Some((base, NO_OWNER))),
        Resolution::UntracedObject {
            type_id,
            base,
            offset,
        } => (
            Bucket::UntracedSlab,
            type_id,
            offset,
            Some((base, NO_OWNER)),
        ),
        Resolution::Region {
            type_id,
            base,
            offset,
        } => (Bucket::Region, type_id, offset, Some((base, NO_OWNER))),
        Resolution::Slab { .. } | Resolution::Unknown => return None,
    })
}

#[inline]
fn replay_sample(resolver: &mut Resolver<'_>, st: &mut State, cpu: u32, access: &SampleAccess) {
    // A context that gives the resolver what was worked out at ingestion: any address in the
    // stack region stands for %rsp, and the gs base is what makes the offset.
    let ctx = SampleContext {
        cpu,
        gs_base: access.addr.wrapping_sub(access.gs_offset),
        rsp: if access.flags & ON_STACK != 0 {
            access.addr
        } else {
            0
        },
    };
    let ip = access.ip;
    let (resolution, touch) = resolver.resolve_touch(access.addr, access.gs_relative(), &ctx);
    let (bucket, type_id, offset, instance) = match resolution {
        Resolution::Slab {
            slot,
            type_id,
            offset,
        } => {
            record_slab_sample(resolver, st, slot, offset, cpu, access);
            (Bucket::Slab, type_id, offset, None)
        }
        Resolution::Unknown => {
            if counts_in_buckets(st, cpu, access, false) {
                st.buckets[Bucket::UnknownAddress.index()] += 1;
            }
            st.unknown_ips.entry(ip).or_default().add_access(access);
            return;
        }
        other => match instance_of(other) {
            Some(placed) => placed,
            None => return,
        },
    };
    if counts_in_buckets(st, cpu, access, true) {
        st.buckets[bucket.index()] += 1;
    }
    let acc = type_acc(&mut st.types, type_id);
    // Only slab hits come with a touch.
    match touch {
        Some(Touch::First) => acc.objects += 1,
        Some(Touch::Bounced) => acc.bounced += 1,
        Some(Touch::Again) | None => {}
    }
    if let Some((key, owner)) = instance {
        // A per-CPU copy belongs to its CPU from the start: any other CPU bounces it.
        let inst = st.instances.entry((type_id.0, key)).or_insert_with(|| {
            acc.objects += 1;
            Instance {
                first_cpu: if owner == NO_OWNER { cpu } else { owner },
                bounced: false,
            }
        });
        if inst.first_cpu != cpu && !inst.bounced {
            inst.bounced = true;
            acc.bounced += 1;
        }
    }
    acc.rw.add_access(access);
    acc.hw.add(access);
    if cpu < MAX_TRACKED_CPU {
        let c = cpu as usize;
        if c >= acc.cpus.len() {
            acc.cpus.resize(c + 1, 0);
        }
        if let Some(n) = acc.cpus.get_mut(c) {
            *n += 1;
        }
    }
    let entry = st.accesses.get_or_default(AccessKey {
        type_id: type_id.0,
        offset,
        ip,
    });
    entry.rw.add_access(access);
    entry.size = u32::from(access.size);
    if access.hw & (HW_KNOWN | HW_HAS_LATENCY) == 0 {
        return;
    }
    if entry.hw == NO_HW {
        entry.hw = u32::try_from(st.access_hw.len()).unwrap_or(NO_HW);
        st.access_hw.push(AccessHw::default());
    }
    let Some(hw) = st.access_hw.get_mut(entry.hw as usize) else {
        return;
    };
    if access.hw & HW_KNOWN != 0 {
        hw.samples += 1;
        if let Some(n) = hw.sources.get_mut(usize::from(access.hw & HW_SOURCE_MASK)) {
            *n += 1;
        }
    }
    if access.hw & HW_HAS_LATENCY != 0 {
        hw.latency_samples += 1;
        hw.latency_sum += u64::from(access.latency);
    }
}

/// Whether an operand's resolution (`resolved` or not) is its sample's bucket: a sample with
/// two memory operands counts once, by the first that resolves, or as unresolved when
/// neither does. Each operand still counts for its own type.
fn counts_in_buckets(st: &mut State, cpu: u32, access: &SampleAccess, resolved: bool) -> bool {
    if access.flags & FIRST_OF_TWO != 0 {
        st.first_of_two = Some(FirstOfTwo {
            cpu,
            ip: access.ip,
            counted: resolved,
        });
        resolved
    } else if access.flags & SECOND_OF_TWO != 0 {
        st.two_location_samples += 1;
        // The first is replayed just before (same CPU and time); anything else, which only
        // hostile input could make, counts on its own.
        match st.first_of_two.take() {
            Some(first) if first.cpu == cpu && first.ip == access.ip => !first.counted,
            _ => true,
        }
    } else {
        true
    }
}

/// Function name of `ip` (Rust symbols demangled, without their hash), or the address.
fn function_name(symbols: &dyn SymbolSource, ip: u64) -> String {
    symbols.function(ip).map_or_else(
        || format!("{ip:#x}"),
        |(name, _)| format!("{:#}", rustc_demangle::demangle(name)),
    )
}

/// Sums `(name, Rw)` pairs by name into counts, most first: most misses first when `hw` (the
/// profile has hardware samples; their misses are then reported), else most samples.
fn function_counts(items: impl IntoIterator<Item = (String, Rw)>, hw: bool) -> Vec<FunctionCount> {
    let mut by_name: FxHashMap<String, Rw> = FxHashMap::default();
    for (name, rw) in items {
        by_name.entry(name).or_default().merge(rw);
    }
    let mut out: Vec<FunctionCount> = by_name
        .into_iter()
        .map(|(function, rw)| FunctionCount {
            function,
            samples: rw.total(),
            reads: rw.reads,
            writes: rw.writes,
            read_writes: rw.read_writes,
            misses: hw.then_some(rw.misses),
        })
        .collect();
    out.sort_by(|a, b| {
        b.misses
            .cmp(&a.misses)
            .then(b.samples.cmp(&a.samples))
            .then_with(|| a.function.cmp(&b.function))
    });
    out
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass from accumulators to the model"
)]
fn build_report(a: &Analyzer<'_>) -> Report {
    let st = &a.state;
    let symbols = a.resolver.symbols();
    let types = a.resolver.types();
    let coverage =
        Coverage::from_counts(&st.buckets).with_two_location_samples(st.two_location_samples);
    let resolved = coverage.resolved_samples;
    // With hardware samples, types, fields and functions are ranked by misses.
    let hw = st.hw_samples > 0;
    let mut hw_total = HwAcc::default();
    for acc in &st.types {
        hw_total.merge(&acc.hw);
    }

    // Functions and fields per type, from the (type, offset, ip) aggregation.
    let mut names: FxHashMap<u64, String> = FxHashMap::default();
    let mut per_type_fns: FxHashMap<u32, Vec<(String, Rw)>> = FxHashMap::default();
    let mut per_type_fields: FxHashMap<(u32, u64), (Rw, u32, u64)> = FxHashMap::default();
    for (key, acc) in st.accesses.iter() {
        let name = names
            .entry(key.ip)
            .or_insert_with(|| function_name(symbols, key.ip))
            .clone();
        per_type_fns
            .entry(key.type_id)
            .or_default()
            .push((name, acc.rw));
        let field = per_type_fields.entry((key.type_id, key.offset)).or_insert((
            Rw::default(),
            acc.size,
            0,
        ));
        field.0.merge(acc.rw);
        // The size of the most sampled instruction at this offset (ties: smaller ip, so the
        // report does not depend on hash order).
        let n = acc.rw.total();
        if n > field.2 || (n == field.2 && acc.size < field.1) {
            field.1 = acc.size;
            field.2 = n;
        }
    }
    let mut per_type_field_list: FxHashMap<u32, Vec<FieldCount>> = FxHashMap::default();
    for ((type_id, offset), (rw, size, _)) in per_type_fields {
        per_type_field_list
            .entry(type_id)
            .or_default()
            .push(FieldCount {
                offset,
                size,
                field: None,
                samples: rw.total(),
                reads: rw.reads,
                writes: rw.writes,
                read_writes: rw.read_writes,
                misses: hw.then_some(rw.misses),
            });
    }

    let mut profiles: Vec<TypeProfile> = Vec::new();
    // Types only allocated are not ranked: counted, their objects in the address set.
    let mut unsampled_types = 0;
    for (id, info) in types.iter() {
        let Some(acc) = st.types.get(id.0 as usize) else {
            continue;
        };
        let samples = acc.rw.total();
        if samples == 0 {
            if acc.allocs > 0 {
                unsampled_types += 1;
            }
            continue;
        }
        let slab = info.kind == TypeKind::Slab;
        let functions = function_counts(per_type_fns.remove(&id.0).unwrap_or_default(), hw);
        let mut fields = per_type_field_list.remove(&id.0).unwrap_or_default();
        fields.sort_by(|x, y| {
            y.misses
                .cmp(&x.misses)
                .then(y.samples.cmp(&x.samples))
                .then(x.offset.cmp(&y.offset))
        });
        let mut cpus: Vec<CpuCount> = acc
            .cpus
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(cpu, &n)| CpuCount {
                cpu: cpu as u32,
                samples: n,
            })
            .collect();
        cpus.sort_by(|x, y| y.samples.cmp(&x.samples).then(x.cpu.cmp(&y.cpu)));
        profiles.push(TypeProfile {
            rank: 0,
            name: info.name.clone(),
            kind: info.kind,
            cache: info.cache.clone(),
            site: info.site.clone(),
            struct_name: None,
            object_size: info.object_size,
            samples,
            share: if resolved == 0 {
                0.0
            } else {
                samples as f64 / resolved as f64
            },
            reads: acc.rw.reads,
            writes: acc.rw.writes,
            read_writes: acc.rw.read_writes,
            objects: acc.objects,
            bounced_objects: acc.bounced,
            bounce: acc.bounced > 0,
            bounced_histories: None,
            allocs: slab.then_some(acc.allocs),
            frees: slab.then_some(acc.frees),
            peak_live_objects: slab.then_some(acc.peak_objects),
            peak_live_bytes: slab.then_some(acc.peak_bytes),
            hardware: hw.then(|| acc.hw.report(hw_total.misses)),
            functions,
            fields,
            cpus,
        });
    }
    let misses = |t: &TypeProfile| t.hardware.as_ref().map(|h| h.misses);
    profiles.sort_by(|x, y| {
        misses(y)
            .cmp(&misses(x))
            .then(y.samples.cmp(&x.samples))
            .then(y.peak_live_bytes.cmp(&x.peak_live_bytes))
            .then_with(|| x.name.cmp(&y.name))
    });
    for (i, p) in profiles.iter_mut().enumerate() {
        p.rank = i + 1;
    }

    let unknown_functions = function_counts(
        st.unknown_ips
            .iter()
            .map(|(&ip, &rw)| (function_name(symbols, ip), rw)),
        hw,
    );
    let counts = a.resolver.counts();
    let address_set = AddressSetStats {
        allocs: counts.allocs,
        frees: counts.frees,
        unknown_frees: counts.unknown_frees,
        null_frees: counts.null_frees,
        missed_frees: counts.missed_frees,
        unknown_cache_allocs: counts.unknown_cache_allocs,
        live_at_end: a.resolver.objects().len() as u64,
        peak_live_objects: st.peak_live,
    };
    let rc = a.reorder.counts();
    let ordering = OrderingStats {
        late_records: rc.late,
        forced_records: rc.forced,
        max_buffered: rc.max_buffered,
        window_ns: a.options.reorder_window_ns,
    };
    let function_count = symbols.function_count();
    let merged_caches = merged_caches(&a.resolver, &profiles);
    let warnings = warnings(
        a,
        &coverage,
        &address_set,
        &ordering,
        function_count,
        &merged_caches,
    );
    let coverage = match instruction_types(a, &names) {
        Some(found) => coverage.with_instruction_types(found),
        None => coverage,
    };
    Report {
        profile: ProfileInfo {
            kernel_release: a.header.kernel_release.clone(),
            cpu_model: a.header.cpu_model.clone(),
            online_cpus: a.header.online_cpus,
            slab_merging: a.header.slab_merging,
            merged_caches,
            records: st.records,
            first_time_ns: st.first_time,
            last_time_ns: st.last_time,
            lost_records: st.lost,
            kallsyms_functions: function_count,
        },
        coverage,
        data_profile: DataProfile {
            metric: if hw { Metric::Misses } else { Metric::Samples },
            resolved_samples: resolved,
            hardware: hw.then(|| hardware_summary(st, &hw_total)),
            types: profiles,
            unsampled_types,
        },
        unknown_functions,
        address_set,
        ordering,
        warnings,
        histories: None,
        misses: None,
        working_set: None,
        causal: a
            .header
            .config
            .causal
            .as_ref()
            .filter(|_| !st.experiments.is_empty())
            .map(|config| crate::causal::analyze(config, &st.experiments)),
    }
}

/// The accesses typed by their instruction (the second resolver), with debug info only: every
/// (type, offset, instruction) the replay aggregated, and the instructions whose addresses
/// resolved to nothing. `names` has the function of every ip of the aggregation.
fn instruction_types(
    a: &Analyzer<'_>,
    names: &FxHashMap<u64, String>,
) -> Option<dprof_model::instruction_types::InstructionTypes> {
    use crate::instruction_types::Observation;
    let symbols = a.resolver.symbols();
    if !symbols.types_instructions() {
        return None;
    }
    let types = a.resolver.types();
    let resolved = a.state.accesses.iter().filter_map(|(key, acc)| {
        let info = types.get(TypeId(key.type_id))?;
        Some(Observation {
            ip: key.ip,
            address_type: Some((info.name.as_str(), info.site.is_some())),
            offset: Some(key.offset),
            samples: acc.rw.total(),
        })
    });
    let unknown = a.state.unknown_ips.iter().map(|(&ip, rw)| Observation {
        ip,
        address_type: None,
        offset: None,
        samples: rw.total(),
    });
    let function = |ip: u64| {
        names
            .get(&ip)
            .cloned()
            .unwrap_or_else(|| function_name(symbols, ip))
    };
    crate::instruction_types::type_accesses(
        resolved.chain(unknown),
        &|ip| a.decoder.base_operand(ip),
        symbols,
        &function,
    )
}

/// The merged pools among the caches of `types` (ranked), in rank order of their first type.
fn merged_caches(resolver: &Resolver<'_>, types: &[TypeProfile]) -> Vec<MergedCache> {
    let mut out: Vec<MergedCache> = Vec::new();
    for cache in types.iter().filter_map(|t| t.cache.as_deref()) {
        if out.iter().any(|m| m.cache == cache) {
            continue;
        }
        if let Some(pool) = resolver.merged_pool(cache) {
            out.push(MergedCache {
                cache: cache.to_owned(),
                pool: pool.pool.clone(),
                aliases: pool.aliases.clone(),
            });
        }
    }
    out
}

/// The profile-wide hardware statistics.
fn hardware_summary(st: &State, total: &HwAcc) -> HardwareSummary {
    let samplers = [
        (dprof_abi::SAMPLER_KIND_IBS, "ibs"),
        (dprof_abi::SAMPLER_KIND_PEBS, "pebs"),
    ]
    .iter()
    .filter(|(kind, _)| st.hw_kinds & 1u8.checked_shl(u32::from(*kind)).unwrap_or(0) != 0)
    .map(|(_, name)| (*name).to_owned())
    .collect();
    let t = total.report(total.misses);
    HardwareSummary {
        samplers,
        samples: st.hw_samples,
        resolved_samples: t.samples,
        misses: t.misses,
        miss_rate: t.miss_rate,
        hitm: t.hitm,
        latency_samples: t.latency_samples,
        mean_latency_cycles: t.mean_latency_cycles,
        hardware_addresses: st.hw_addresses,
        address_mismatches: st.hw_address_mismatches,
        sources: t.sources,
    }
}

/// What slab merging did to the report's types: the merged pools among them when the header
/// lists the pools (none among them: nothing to say), else the old guess from the command
/// line.
fn slab_merging_warning(header: &ProfileHeader, merged: &[MergedCache]) -> Option<String> {
    // Caches named in the warning; the merged-caches lines of the report list them all.
    const NAMED: usize = 5;
    if header.merged_caches.is_empty() {
        return header.slab_merging.then(|| {
            "slab merging was on (no slab_nomerge on the kernel command line): caches of \
             similar geometry share one name, so some types are merged; boot with slab_nomerge \
             for exact types"
                .to_owned()
        });
    }
    if merged.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = merged
        .iter()
        .take(NAMED)
        .map(|m| m.cache.as_str())
        .collect();
    let more = format!("{} more", merged.len().saturating_sub(NAMED));
    if merged.len() > NAMED {
        names.push(&more);
    }
    Some(format!(
        "slab merging was on: {} of the report's caches ({}) are pools that several caches \
         share, so their objects are of several types: their types are split by allocation site \
         (CACHE@function); boot with slab_nomerge for one type per cache",
        merged.len(),
        names.join(", ")
    ))
}

/// Share of memory-access samples at unknown addresses above which the report warns.
const MANY_UNKNOWN: f64 = 0.25;

fn warnings(
    a: &Analyzer<'_>,
    coverage: &Coverage,
    address_set: &AddressSetStats,
    ordering: &OrderingStats,
    function_count: usize,
    merged: &[MergedCache],
) -> Vec<Warning> {
    let mut out = Vec::new();
    let mut warn = |code, message: String| out.push(Warning { code, message });
    if coverage.total_samples == 0 {
        warn(
            WarningCode::NoSamples,
            "the profile has no access samples: collect with --events samples".to_owned(),
        );
    }
    if function_count == 0 {
        warn(
            WarningCode::NoKallsyms,
            "the profile's kallsyms snapshot has no usable symbols (was it collected without \
             root?): functions and allocation sites are shown as addresses, and globals and \
             per-CPU variables cannot be named"
                .to_owned(),
        );
    }
    if let Some(message) = slab_merging_warning(&a.header, merged) {
        warn(WarningCode::SlabMerging, message);
    }
    if a.state.lost > 0 {
        warn(
            WarningCode::RecordsLost,
            format!(
                "the module dropped {} records (full rings): some allocations, frees or samples \
                 are missing, so some addresses resolve to the wrong object or to none; collect \
                 with a larger --ring-size",
                a.state.lost
            ),
        );
    }
    if ordering.late_records > 0 || ordering.forced_records > 0 {
        warn(
            WarningCode::OutOfOrder,
            format!(
                "{} records came later than the {} ms reorder window and {} left the reorder \
                 buffer early because it was full: they were replayed out of time order",
                ordering.late_records,
                ordering.window_ns / 1_000_000,
                ordering.forced_records
            ),
        );
    }
    if address_set.unknown_cache_allocs > 0 {
        warn(
            WarningCode::UnknownCaches,
            format!(
                "{} allocations came from caches the profile has no CacheInfo for: their types \
                 are named by cache address",
                address_set.unknown_cache_allocs
            ),
        );
    }
    if a.state.gs_relative_samples > 0 && a.resolver.symbols().percpu_range().is_none() {
        warn(
            WarningCode::NoPercpuLayout,
            format!(
                "{} samples accessed per-CPU data but the profile does not place the per-CPU \
                 area (kallsyms lists no __per_cpu_start, and the collector did not find it \
                 from the kernel's code): they are counted as {}",
                a.state.gs_relative_samples,
                crate::resolve::PERCPU_DYNAMIC_TYPE
            ),
        );
    }
    let unknown = coverage.count(Bucket::UnknownAddress);
    let with_address = unknown + coverage.resolved_samples;
    if with_address > 0 && unknown as f64 > MANY_UNKNOWN * with_address as f64 {
        warn(
            WarningCode::ManyUnknown,
            format!(
                "{:.1}% of sampled data addresses resolved to nothing: objects allocated before \
                 collection started are not in the address set; start collecting before the \
                 workload",
                unknown as f64 * 100.0 / with_address as f64
            ),
        );
    }
    out
}

/// Exact live objects of every slab type at any time of `profile` (see [`LiveIndex`](crate::views::LiveIndex)), with
/// types named from the profile's own kallsyms: the address set replayed, nothing else
/// computed.
///
/// # Errors
/// The first problem found while reading the records.
pub fn live_index(profile: &Profile) -> Result<crate::views::LiveIndex, ProfileError> {
    let symbols = profile_kallsyms(profile);
    let mut analyzer = Analyzer::new(profile.header(), &symbols, &Options::default());
    analyzer.set_page_owners(profile.page_owners());
    analyzer.record_views();
    let mut records = profile.records();
    while let Some(pushed) =
        records.next_view_with(|header, record| analyzer.push_view(header, record))
    {
        pushed?;
    }
    let (_, _, recorded) = analyzer.finish_with_views();
    Ok(recorded.map_or_else(crate::views::LiveIndex::default, |r| {
        crate::views::LiveIndex::from_recorded(&r)
    }))
}

#[cfg(test)]
mod function_name_tests {
    use super::function_name;
    use crate::symbols::Kallsyms;

    #[test]
    fn rust_symbols_are_demangled_and_c_symbols_kept() {
        let kallsyms = Kallsyms::parse(
            b"ffffffffa0000000 t _RNvMs_NtCsjer0vnqcy3J_10dprof_main7sessionNtB4_7Session4emit\t[dprof]\n\
              ffffffffa0000100 t dprof_selftest_produce\t[dprof_selftest]\n\
              ffffffffa0000200 t end_marker\t[dprof_selftest]\n",
        );
        assert_eq!(
            function_name(&kallsyms, 0xffff_ffff_a000_0010),
            "<dprof_main::session::Session>::emit"
        );
        assert_eq!(
            function_name(&kallsyms, 0xffff_ffff_a000_0104),
            "dprof_selftest_produce"
        );
        assert_eq!(function_name(&kallsyms, 0x10), "0x10");
    }
}
