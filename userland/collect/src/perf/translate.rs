//! perf's records in the module's ABI: the kmem tracepoints' raw records become [`Alloc`],
//! [`Free`] and [`CacheInfo`] records, cpu-clock samples become [`AccessSample`]s with their
//! instruction bytes, and perf's lost counts become [`Lost`] records, so that the profile
//! file and its analysis are the same whichever backend collected.
//!
//! The module names a cache by its `struct kmem_cache` address; perf gives its name. Here a
//! cache is identified by a small number per name, described once by a [`CacheInfo`] with
//! the geometry `/sys/kernel/slab` gives.

use std::collections::HashMap;

use dprof_abi::{
    AccessSample, Alloc, CacheInfo, Free, Lost, Record, ALLOC_KMALLOC, CACHE_ORIGIN_SEEN,
    CACHE_ORIGIN_WALK, FREE_KFREE, MAX_RECORD_SIZE, SAMPLER_KIND_SOFTWARE, SAMPLE_USER,
};

use linux_perf_event_reader::{CpuMode, SampleRecord};

use super::events::ABI_REG_ORDER;
use super::hw_sample::HwSample;
use super::memory::KernelMemory;
use super::page_reader::{CachesRead, PageReader};
use super::pages::{PageFields, PageRecord, PageTracker};
use super::tracefs::{Field, Format, RawRecord};

mod waiting;

use waiting::{Held, Waiting, WaitingAlloc};

/// Which kmem tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kmem {
    /// `kmem:kmem_cache_alloc`.
    CacheAlloc,
    /// `kmem:kmalloc`.
    Kmalloc,
    /// `kmem:kmem_cache_free`.
    CacheFree,
    /// `kmem:kfree`.
    Kfree,
}

impl Kmem {
    /// Every one, with its tracefs name.
    pub(crate) const ALL: [(Self, &'static str); 4] = [
        (Self::CacheAlloc, "kmem_cache_alloc"),
        (Self::Kmalloc, "kmalloc"),
        (Self::CacheFree, "kmem_cache_free"),
        (Self::Kfree, "kfree"),
    ];
}

/// Where a kmem tracepoint's fields are, on this kernel.
#[derive(Clone, Debug)]
pub(crate) struct KmemFields {
    pub(crate) kind: Kmem,
    call_site: Field,
    ptr: Field,
    /// The cache's name: `kmem_cache_free` has it everywhere, `kmem_cache_alloc` only on
    /// newer kernels (6.18 has it; 6.12 and 6.1 do not).
    name: Option<Field>,
    bytes_req: Option<Field>,
    bytes_alloc: Option<Field>,
    gfp_flags: Option<Field>,
    node: Option<Field>,
}

impl KmemFields {
    /// The fields of `format`, or why the event cannot be used.
    pub(crate) fn new(kind: Kmem, format: &Format) -> Result<Self, String> {
        let need = |name: &str| {
            format
                .field(name)
                .cloned()
                .ok_or_else(|| format!("kmem:{} has no {name} field", format.name))
        };
        let fields = Self {
            kind,
            call_site: need("call_site")?,
            ptr: need("ptr")?,
            name: format.field("name").cloned(),
            bytes_req: format.field("bytes_req").cloned(),
            bytes_alloc: format.field("bytes_alloc").cloned(),
            gfp_flags: format.field("gfp_flags").cloned(),
            node: format.field("node").cloned(),
        };
        if matches!(kind, Kmem::CacheAlloc | Kmem::Kmalloc) && fields.bytes_alloc.is_none() {
            return Err(format!("kmem:{} has no bytes_alloc field", format.name));
        }
        Ok(fields)
    }

    /// Whether allocations name their cache (`kmem_cache_alloc` on newer kernels).
    pub(crate) fn names_cache(&self) -> bool {
        self.name.is_some()
    }
}

/// A slab cache's geometry, from `/sys/kernel/slab/NAME`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) object_size: u32,
    pub(crate) slot_size: u32,
    pub(crate) align: u32,
}

/// Largest kmalloc served from a `kmalloc-N` cache (SLUB's `KMALLOC_MAX_CACHE_SIZE`, two
/// pages); larger ones come from the page allocator.
const KMALLOC_MAX_CACHE_SIZE: u64 = 8192;
const GFP_DMA: u64 = 1 << 0;
const GFP_RECLAIMABLE: u64 = 1 << 4;
const GFP_ACCOUNT: u64 = 1 << 22;

/// The sizes of SLUB's generic kmalloc caches (`kmalloc_info`), as their names write them.
const KMALLOC_SIZES: [&str; 13] = [
    "8", "16", "32", "64", "96", "128", "192", "256", "512", "1k", "2k", "4k", "8k",
];

/// The generic cache a kmalloc of `bytes_req` bytes with `gfp` came from, as the kernel
/// names it (`kmalloc-64`, `kmalloc-cg-1k`, ...), from the tracepoint's `bytes_alloc`: the
/// cache's slot size (`s->size`). `geometry_of` gives a cache's geometry, `None` for no such
/// cache.
///
/// The cache whose slot is `bytes_alloc` bytes is the one, as the object's slab would tell;
/// where several have such slots, the smallest that holds `bytes_req` bytes, as `kmalloc`
/// chooses. On most kernels the slot of `kmalloc-N` is N bytes; KASAN's redzones and
/// metadata, and SLUB's debugging, make it larger (kmalloc-16's slot is 32 bytes on a KASAN
/// kernel, which the size alone would call kmalloc-32). Without such a cache the size names
/// it; `None` for a large kmalloc, which the page allocator serves.
pub(crate) fn kmalloc_cache(
    bytes_req: u64,
    bytes_alloc: u64,
    gfp: u64,
    geometry_of: impl Fn(&str) -> Option<Geometry>,
) -> Option<String> {
    if bytes_alloc == 0 {
        return None;
    }
    let prefix = if gfp & GFP_DMA != 0 {
        "dma-kmalloc-"
    } else if gfp & GFP_RECLAIMABLE != 0 {
        "kmalloc-rcl-"
    } else if gfp & GFP_ACCOUNT != 0 {
        "kmalloc-cg-"
    } else {
        "kmalloc-"
    };
    // A kernel without the flag's caches (cgroup.memory=nokmem, no ZONE_DMA) serves such
    // allocations from the plain ones.
    let prefix = if KMALLOC_SIZES
        .iter()
        .any(|size| geometry_of(&format!("{prefix}{size}")).is_some())
    {
        prefix
    } else {
        "kmalloc-"
    };
    let by_slot = KMALLOC_SIZES
        .iter()
        .filter_map(|size| {
            let name = format!("{prefix}{size}");
            let g = geometry_of(&name)?;
            (u64::from(g.slot_size) == bytes_alloc && u64::from(g.object_size) >= bytes_req)
                .then_some((g.object_size, name))
        })
        .min();
    if let Some((_, name)) = by_slot {
        return Some(name);
    }
    if bytes_alloc > KMALLOC_MAX_CACHE_SIZE {
        return None;
    }
    let size = if bytes_alloc >= 1024 && bytes_alloc.is_multiple_of(1024) {
        format!("{}k", bytes_alloc / 1024)
    } else {
        bytes_alloc.to_string()
    };
    Some(format!("{prefix}{size}"))
}

/// The name of a cache known only by its slot size.
fn by_size(bytes_alloc: u64) -> Vec<u8> {
    format!("slab-{bytes_alloc}").into_bytes()
}

/// Caches by name: their identifiers in records, and which have been described.
#[derive(Debug, Default)]
pub(crate) struct CacheTable {
    geometry: HashMap<String, Geometry>,
    ids: HashMap<String, (u64, bool)>,
    /// Answers of [`kmalloc_cache`], by (`bytes_req`, `bytes_alloc`, cache-family gfp bits).
    kmalloc_names: HashMap<(u64, u64, u64), Option<String>>,
}

impl CacheTable {
    /// A table knowing the geometry of the caches in `geometry`.
    pub(crate) fn new(geometry: HashMap<String, Geometry>) -> Self {
        Self {
            geometry,
            ids: HashMap::new(),
            kmalloc_names: HashMap::new(),
        }
    }

    /// [`kmalloc_cache`] against the known geometry, remembered: every kmalloc asks, and
    /// the answer depends only on the sizes and the gfp bits that choose a cache family.
    fn kmalloc_name(&mut self, bytes_req: u64, bytes_alloc: u64, gfp: u64) -> Option<String> {
        let key = (
            bytes_req,
            bytes_alloc,
            gfp & (GFP_DMA | GFP_RECLAIMABLE | GFP_ACCOUNT),
        );
        if let Some(name) = self.kmalloc_names.get(&key) {
            return name.clone();
        }
        let name = kmalloc_cache(bytes_req, bytes_alloc, gfp, |n| self.geometry(n));
        self.kmalloc_names.insert(key, name.clone());
        name
    }

    /// The geometry of cache `name`, when it is known.
    pub(crate) fn geometry(&self, name: &str) -> Option<Geometry> {
        self.geometry.get(name).copied()
    }

    /// The identifier of cache `name`, and its [`CacheInfo`] when it is described now.
    fn id(&mut self, name: &[u8], origin: u16) -> (u64, Option<CacheInfo>) {
        let name = String::from_utf8_lossy(name);
        let next = self.ids.len() as u64 + 1;
        let entry = self
            .ids
            .entry(name.clone().into_owned())
            .or_insert((next, false));
        if entry.1 {
            return (entry.0, None);
        }
        entry.1 = true;
        let g = self
            .geometry
            .get(name.as_ref())
            .copied()
            .unwrap_or_default();
        let info = CacheInfo {
            cache: entry.0,
            object_size: g.object_size,
            size: g.slot_size,
            align: g.align,
            slab_flags: 0,
            name_len: 0,
            origin,
            name: [0; dprof_abi::CACHE_NAME_BYTES],
        }
        .with_name(name.as_bytes());
        (entry.0, Some(info))
    }

    /// Names of the caches whose geometry is known, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.geometry.keys().cloned().collect();
        names.sort();
        names
    }
}

/// Allocations whose slab was gone when read, by how they were named.
#[derive(Clone, Copy, Debug, Default)]
struct Late {
    by_free: u64,
    by_size: u64,
}

/// What a perf event is to the translator, by the id in its records.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// The cpu-clock sampler, with the interrupted registers.
    Sampler,
    /// A kmem tracepoint, and where its fields are.
    Kmem(Box<KmemFields>),
    /// A page allocator tracepoint, and where its fields are.
    Pages(Box<PageFields>),
    /// A hardware sampler: IBS op (`ibs`, its registers in the raw data) or PEBS.
    Hardware {
        /// AMD IBS op rather than Intel PEBS.
        ibs: bool,
    },
}

/// What a sample brings, parsed.
pub(crate) struct Sample {
    pub(crate) cpu: u32,
    pub(crate) time_ns: u64,
    pub(crate) ip: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) user: bool,
    /// General-purpose registers in the ABI's order.
    pub(crate) regs: [u64; dprof_abi::SAMPLE_REGS],
}

/// What a [`Translator`] has written, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Access samples.
    pub(crate) samples: u64,
    /// Allocations and frees.
    pub(crate) slab_events: u64,
}

/// Turns perf's records into encoded ABI records, appended to `out`.
#[derive(Debug)]
pub(crate) struct Translator {
    pub(crate) caches: CacheTable,
    memory: Option<KernelMemory>,
    /// Finds an allocation's cache where the tracepoint does not name it: its slab.
    owner: Option<(PageReader, CachesRead)>,
    /// Allocations whose slab was gone when read, waiting for their frees to name them.
    waiting: Waiting,
    /// Page allocations and frees, once the direct map's base is known.
    pages: Option<PageTracker>,
    /// How such allocations were named.
    late: Late,
    /// Per-CPU offsets (`__per_cpu_offset`), by CPU; empty when unknown.
    gs_bases: Vec<u64>,
    /// Encoded records waiting to be read.
    pub(crate) out: Vec<u8>,
    /// Records appended to `out`, per CPU.
    pub(crate) written: Vec<u64>,
    /// Records perf said it lost, per CPU.
    pub(crate) lost: Vec<u64>,
    /// Access samples and slab events (allocations and frees) appended to `out`.
    pub(crate) counts: Counts,
    scratch: Box<[u8; MAX_RECORD_SIZE]>,
}

impl Translator {
    pub(crate) fn new(caches: CacheTable, memory: Option<KernelMemory>, nr_cpus: usize) -> Self {
        Self {
            caches,
            memory,
            owner: None,
            waiting: Waiting::default(),
            pages: None,
            late: Late::default(),
            gs_bases: Vec::new(),
            out: Vec::new(),
            written: vec![0; nr_cpus],
            lost: vec![0; nr_cpus],
            counts: Counts::default(),
            scratch: Box::new([0; MAX_RECORD_SIZE]),
        }
    }

    /// Finds the caches of allocations whose tracepoint does not name it in their slabs,
    /// through `pages`.
    pub(crate) fn set_slab_owner(&mut self, pages: PageReader) {
        self.owner = Some((pages, CachesRead::default()));
    }

    /// Turns page allocator events into records through `pages`; without it they are
    /// dropped.
    pub(crate) fn set_page_tracker(&mut self, pages: PageTracker) {
        self.pages = Some(pages);
    }

    /// What became of the page allocations, once collection has ended; taken once.
    pub(crate) fn pages_note(&mut self) -> Option<String> {
        let pages = self.pages.take()?;
        Some(format!(
            "page allocations: {} typed by their site (page@SITE), {} left to the slab and \
             kmalloc events that describe them",
            pages.recorded, pages.described_elsewhere
        ))
    }

    /// Whether any CPU's per-CPU offset is known: both sources (`__per_cpu_offset`, the run
    /// queues) give every online CPU's at once, so one known means all were found.
    pub(crate) fn knows_gs_bases(&self) -> bool {
        self.gs_bases.iter().any(|&b| b != 0)
    }

    /// Takes each CPU's per-CPU offset from `bases` (CPU, offset).
    pub(crate) fn set_gs_bases(&mut self, bases: &[(u32, u64)]) {
        for &(cpu, base) in bases {
            let cpu = cpu as usize;
            if cpu >= self.written.len() {
                continue;
            }
            if self.gs_bases.len() <= cpu {
                self.gs_bases.resize(self.written.len(), 0);
            }
            self.gs_bases[cpu] = base;
        }
    }

    /// Reads each CPU's per-CPU offset from the `__per_cpu_offset` array at `address`: the
    /// %gs base the module's sampler reads from the CPU.
    pub(crate) fn learn_gs_bases(&mut self, address: u64) {
        let Some(memory) = &mut self.memory else {
            return;
        };
        self.gs_bases = (0..self.written.len() as u64)
            .map(|cpu| memory.u64_at(address + 8 * cpu).unwrap_or(0))
            .collect();
    }

    /// Appends `record` to the output, or holds it behind an allocation of its CPU that
    /// waits for its cache's name. A cache's description is never held: it only names.
    fn emit(&mut self, cpu: u32, time_ns: u64, record: &Record) {
        let n = record.encode(cpu, time_ns, &mut self.scratch);
        if !matches!(record, Record::CacheInfo(_)) && self.waiting.holds(cpu) {
            self.waiting.hold(cpu, &self.scratch[..n]);
            return;
        }
        self.out.extend_from_slice(&self.scratch[..n]);
        self.count_written(cpu);
    }

    fn count_written(&mut self, cpu: u32) {
        if let Some(w) = self.written.get_mut(cpu as usize) {
            *w += 1;
        }
    }

    /// Writes out what `cpu` held that may now go on.
    fn release(&mut self, cpu: u32) {
        while let Some(item) = self.waiting.next_ready(cpu) {
            match item {
                Held::Record(bytes) => {
                    self.out.extend_from_slice(&bytes);
                    self.count_written(cpu);
                }
                Held::Alloc(waited) => self.emit_waited(cpu, &waited),
            }
        }
    }

    fn emit_waited(&mut self, cpu: u32, waited: &WaitingAlloc) {
        let cache = if let Some(cache) = waited.named_cache() {
            self.late.by_free += 1;
            cache
        } else {
            self.late.by_size += 1;
            self.cache(cpu, waited.time_ns, &waited.by_size)
        };
        let alloc = Alloc {
            cache,
            ..waited.alloc
        };
        let n = Record::Alloc(alloc).encode(cpu, waited.time_ns, &mut self.scratch);
        self.out.extend_from_slice(&self.scratch[..n]);
        self.count_written(cpu);
    }

    /// One drain of every ring has ended: allocations that waited two drains for their
    /// frees take their size's name, and what they held goes on.
    pub(crate) fn drain_ended(&mut self) {
        self.waiting.drain_ended();
        for cpu in self.waiting.cpus_holding() {
            self.release(cpu);
        }
    }

    /// Collection has ended and every ring is drained: nothing waits any longer. Says how
    /// the allocations whose slabs were gone when read were named, if there were any.
    pub(crate) fn finish(&mut self) -> Option<String> {
        self.waiting.give_up();
        for cpu in self.waiting.cpus_holding() {
            self.release(cpu);
        }
        let Late { by_free, by_size } = std::mem::take(&mut self.late);
        (by_free + by_size > 0).then(|| {
            format!(
                "the slabs of {} allocations were gone when read: {by_free} were named by \
                 their frees, {by_size} by their size only (slab-N)",
                by_free + by_size
            )
        })
    }

    /// Describes every cache `/sys/kernel/slab` listed, as the module does when it starts.
    pub(crate) fn describe_all(&mut self, time_ns: u64) {
        for name in self.caches.names() {
            if let (_, Some(info)) = self.caches.id(name.as_bytes(), CACHE_ORIGIN_WALK) {
                self.emit(0, time_ns, &Record::CacheInfo(info));
            }
        }
    }

    fn cache(&mut self, cpu: u32, time_ns: u64, name: &[u8]) -> u64 {
        let (id, info) = self.caches.id(name, CACHE_ORIGIN_SEEN);
        if let Some(info) = info {
            self.emit(cpu, time_ns, &Record::CacheInfo(info));
        }
        id
    }

    /// One kmem tracepoint hit.
    pub(crate) fn kmem(&mut self, fields: &KmemFields, cpu: u32, time_ns: u64, raw: &[u8]) {
        let raw = RawRecord(raw);
        let (Some(ptr), Some(call_site)) =
            (raw.unsigned(&fields.ptr), raw.unsigned(&fields.call_site))
        else {
            return;
        };
        // NULL and ZERO_SIZE_PTR (16): a failed or empty allocation, a free of nothing.
        if ptr <= 16 {
            return;
        }
        let opt = |f: &Option<Field>| f.as_ref().and_then(|f| raw.unsigned(f)).unwrap_or(0);
        let name = fields.name.as_ref().and_then(|f| raw.string(f));
        match fields.kind {
            Kmem::CacheAlloc | Kmem::Kmalloc => {
                let bytes_alloc = opt(&fields.bytes_alloc);
                let gfp = opt(&fields.gfp_flags);
                let kmalloc = fields.kind == Kmem::Kmalloc;
                // `None`: the allocation waits for its free to name its cache.
                let cache = match (kmalloc, name) {
                    (false, Some(name)) => Some(self.cache(cpu, time_ns, name)),
                    (true, _) => Some(
                        match self
                            .caches
                            .kmalloc_name(opt(&fields.bytes_req), bytes_alloc, gfp)
                        {
                            Some(name) => self.cache(cpu, time_ns, name.as_bytes()),
                            None => 0,
                        },
                    ),
                    // Older kernels do not name the cache of an allocation: the object's slab
                    // does while it lasts, else its free, else only its size is known.
                    (false, None) => match (&mut self.owner, &mut self.memory) {
                        (Some((pages, caches)), Some(memory)) => pages
                            .cache_of(ptr, bytes_alloc, memory, caches)
                            .map(|name| self.cache(cpu, time_ns, name.as_bytes())),
                        _ => Some(self.cache(cpu, time_ns, &by_size(bytes_alloc))),
                    },
                };
                let node = fields
                    .node
                    .as_ref()
                    .and_then(|f| raw.signed(f))
                    .unwrap_or(-1);
                let alloc = Alloc {
                    ptr,
                    call_site,
                    cache: cache.unwrap_or(0),
                    bytes_req: u32::try_from(opt(&fields.bytes_req)).unwrap_or(u32::MAX),
                    bytes_alloc: u32::try_from(bytes_alloc).unwrap_or(u32::MAX),
                    gfp: gfp as u32,
                    node: node as i32,
                    flags: if kmalloc { ALLOC_KMALLOC } else { 0 },
                };
                self.counts.slab_events += 1;
                if cache.is_some() {
                    self.emit(cpu, time_ns, &Record::Alloc(alloc));
                } else {
                    let waiting = WaitingAlloc::new(time_ns, alloc, by_size(bytes_alloc));
                    self.waiting.wait(cpu, waiting);
                    self.release(cpu);
                }
            }
            Kmem::CacheFree | Kmem::Kfree => {
                let cache = match name {
                    Some(name) => self.cache(cpu, time_ns, name),
                    None => 0,
                };
                if self.owner.is_some() {
                    let named = (cache != 0).then_some(cache);
                    if let Some(waited_on) = self.waiting.freed(ptr, time_ns, named) {
                        self.release(waited_on);
                    }
                }
                let free = Free {
                    ptr,
                    call_site,
                    cache,
                    flags: if fields.kind == Kmem::Kfree {
                        FREE_KFREE
                    } else {
                        0
                    },
                };
                self.emit(cpu, time_ns, &Record::Free(free));
                self.counts.slab_events += 1;
            }
        }
    }

    /// A sample as the module records it, before any hardware fields: the registers, the
    /// %gs base of its CPU and the instruction bytes at its ip (none for user mode).
    fn access_sample(&mut self, s: &Sample, sampler: u8) -> AccessSample {
        let (insn, insn_len) = match (&mut self.memory, s.user) {
            (Some(memory), false) => memory.insn(s.ip),
            _ => ([0; dprof_abi::SAMPLE_INSN_BYTES], 0),
        };
        AccessSample {
            ip: s.ip,
            regs: s.regs,
            gs_base: self.gs_bases.get(s.cpu as usize).copied().unwrap_or(0),
            pid: s.pid,
            tid: s.tid,
            insn,
            insn_len,
            flags: if s.user { SAMPLE_USER } else { 0 },
            sampler,
            ..AccessSample::default()
        }
    }

    /// One cpu-clock sample, with the instruction bytes at its ip.
    pub(crate) fn sample(&mut self, s: &Sample) {
        let sample = self.access_sample(s, SAMPLER_KIND_SOFTWARE);
        self.emit(s.cpu, s.time_ns, &Record::AccessSample(sample));
        self.counts.samples += 1;
    }

    /// One perf sample record of `source`: a kmem tracepoint's raw record or a cpu-clock
    /// sample with its registers (one without them is dropped). `cpu` is the ring's, for a
    /// record that does not say; `last_time` is the time of the ring's last record, for one
    /// that has none, and becomes this one's.
    pub(crate) fn perf_sample(
        &mut self,
        source: &Source,
        s: &SampleRecord<'_>,
        cpu: u32,
        last_time: &mut u64,
    ) {
        let time_ns = s.timestamp.unwrap_or(*last_time);
        *last_time = time_ns;
        let cpu = s.cpu.unwrap_or(cpu);
        match source {
            Source::Kmem(fields) => {
                if let Some(raw) = &s.raw {
                    self.kmem(fields, cpu, time_ns, &raw.as_slice());
                }
            }
            Source::Pages(fields) => {
                let (Some(raw), Some(pages)) = (&s.raw, &mut self.pages) else {
                    return;
                };
                // On the stack: every page event comes here. The chain holds at most the
                // events' 16 frames and perf's context markers.
                let mut frames = [0u64; 32];
                let mut n = 0;
                if let Some(c) = &s.callchain {
                    for (slot, i) in frames.iter_mut().zip(0..c.len()) {
                        *slot = c.get(i).unwrap_or(0);
                        n += 1;
                    }
                }
                let record = match pages.event(fields, &raw.as_slice(), &frames[..n]) {
                    Some(PageRecord::Alloc(alloc)) => Record::Alloc(alloc),
                    Some(PageRecord::Free(free)) => Record::Free(free),
                    None => return,
                };
                self.emit(cpu, time_ns, &record);
                self.counts.slab_events += 1;
            }
            Source::Sampler => {
                let Some(regs) = &s.intr_regs else { return };
                let mut abi_regs = [0u64; dprof_abi::SAMPLE_REGS];
                for (slot, &perf_reg) in abi_regs.iter_mut().zip(&ABI_REG_ORDER) {
                    *slot = regs.get(u64::from(perf_reg)).unwrap_or(0);
                }
                self.sample(&Sample {
                    cpu,
                    time_ns,
                    ip: s.ip.unwrap_or(0),
                    pid: s.pid.unwrap_or(0) as u32,
                    tid: s.tid.unwrap_or(0) as u32,
                    user: s.cpu_mode == CpuMode::User,
                    regs: abi_regs,
                });
            }
            // Parsed by `hw_sample`: this parser drops their latency and data source.
            Source::Hardware { .. } => {}
        }
    }

    /// One hardware sample: the data address, its source and latency as perf reports them,
    /// and, for IBS, the raw registers (a sample without them is dropped, as the module
    /// drops it: the decoder needs them).
    pub(crate) fn hardware_sample(&mut self, ibs: bool, s: &HwSample<'_>) {
        let ibs_regs = if ibs {
            match dprof_abi::IbsRegs::from_perf_raw(s.raw) {
                Some(regs) => Some(regs),
                None => return,
            }
        } else {
            None
        };
        let base = Sample {
            cpu: s.cpu,
            time_ns: s.time_ns,
            ip: s.ip,
            pid: s.pid,
            tid: s.tid,
            user: s.user,
            regs: s.regs,
        };
        let sampler = if ibs {
            dprof_abi::SAMPLER_KIND_IBS
        } else {
            dprof_abi::SAMPLER_KIND_PEBS
        };
        // perf writes zero for what the PMU did not measure.
        let valid = |bit: u32, value: u64| if value == 0 { 0 } else { bit };
        let sample = AccessSample {
            hw_valid: valid(dprof_abi::HW_DATA_ADDR, s.addr)
                | valid(dprof_abi::HW_PHYS_ADDR, s.phys_addr)
                | valid(dprof_abi::HW_DATA_SRC, s.data_src)
                | valid(dprof_abi::HW_LATENCY, s.weight),
            data_addr: s.addr,
            phys_addr: s.phys_addr,
            data_src: s.data_src,
            latency: u32::try_from(s.weight).unwrap_or(u32::MAX),
            ibs: ibs_regs,
            ..self.access_sample(&base, sampler)
        };
        self.emit(s.cpu, s.time_ns, &Record::AccessSample(sample));
        self.counts.samples += 1;
    }

    /// perf lost `count` records of `cpu`'s ring.
    pub(crate) fn lost(&mut self, cpu: u32, time_ns: u64, count: u64) {
        if let Some(l) = self.lost.get_mut(cpu as usize) {
            *l += count;
        }
        self.emit(cpu, time_ns, &Record::Lost(Lost { count }));
    }
}

#[cfg(test)]
mod tests;
