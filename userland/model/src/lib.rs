//! The report model: what `dprof report` shows, as plain data (serde both ways: `dprof report
//! --json` writes it, `dprof tui` reads it back). The CLI, the TUI and exporters render it;
//! nothing here prints.
//!
//! The data profile (paper section 3.1) ranks data types by L1 data-cache misses when a
//! hardware sampler (IBS, PEBS) took the samples, with miss rates, latencies, data sources and
//! HITM counts ([`TypeHardware`]); by samples otherwise (the software sampler has no miss
//! bits, so samples stand in for misses). [`DataProfile::metric`] says which. Every sample
//! lands in exactly one [`Bucket`] of the [`Coverage`], so the report always says what it
//! could not see.
//!
//! Field names are optional: offsets are always there, names only once
//! [`Report::annotate_fields`] ran with a [`FieldSource`] (DWARF of vmlinux).

pub mod cache;
pub mod causal;
pub mod histories;
pub mod instruction_types;
pub mod misses;
pub mod units;
pub mod working_set;

mod access;
mod memory_source;

pub use access::AccessKind;
pub use memory_source::{MemSource, SourceCount};

use serde::{Deserialize, Serialize};

use crate::causal::CausalReport;
use crate::histories::HistoryReport;
use crate::misses::MissReport;
use crate::working_set::WorkingSetReport;

/// The whole report of one profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// What the profile is.
    pub profile: ProfileInfo,
    /// Where every sample went.
    pub coverage: Coverage,
    /// Types ranked by misses or samples.
    pub data_profile: DataProfile,
    /// Functions whose samples touched addresses nothing resolved, most first.
    pub unknown_functions: Vec<FunctionCount>,
    /// The address set replay.
    pub address_set: AddressSetStats,
    /// Ordering of records by time.
    pub ordering: OrderingStats,
    /// What the analysis could not do, one sentence each.
    pub warnings: Vec<Warning>,
    /// Object access histories, path traces and data flow; absent when the profile has no
    /// history (collected without `--histories`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histories: Option<HistoryReport>,
    /// Miss classification per type; absent unless the views were asked for
    /// ([`crate::pipeline::analyze_views`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misses: Option<MissReport>,
    /// Live objects over time, cache residency and set histograms per type; absent unless
    /// the views were asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set: Option<WorkingSetReport>,
    /// Types ranked by their effect on progress in causal experiments; absent when the
    /// profile has none (collected without `dprof causal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal: Option<CausalReport>,
}

/// The profile the report is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileInfo {
    /// Kernel release.
    pub kernel_release: String,
    /// CPU model.
    pub cpu_model: String,
    /// CPUs online.
    pub online_cpus: u32,
    /// Whether slab merging was on.
    pub slab_merging: bool,
    /// The caches of the report's types that the kernel merged with others, in rank order of
    /// their first type; empty when the profile does not say which were merged (older
    /// profiles, no sysfs) or none of the report's were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_caches: Vec<MergedCache>,
    /// Records read.
    pub records: u64,
    /// Earliest record time (ns).
    pub first_time_ns: Option<u64>,
    /// Latest record time (ns).
    pub last_time_ns: Option<u64>,
    /// Records the module dropped (sum of Lost records).
    pub lost_records: u64,
    /// Code symbols in the kallsyms snapshot (0: functions are addresses).
    pub kallsyms_functions: usize,
}

/// A slab cache that the kernel merged with others of the same geometry: one pool, named after
/// its first creator, holds the objects of every alias, so its types are split by allocation
/// site (`rtable@ip_route_output_key_hash`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedCache {
    /// The cache name the report's types carry ([`TypeProfile::cache`]).
    pub cache: String,
    /// The pool's directory in `/sys/kernel/slab`, e.g. `:0000192`.
    pub pool: String,
    /// Every cache name merged into the pool, sorted (`cache` among them).
    pub aliases: Vec<String>,
}

/// What the data profile ranks types by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Sampled accesses (no miss information: the software sampler).
    Samples,
    /// L1 data-cache misses seen by a hardware sampler ([`TypeHardware::misses`]).
    Misses,
}

/// Types ranked by [`DataProfile::metric`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataProfile {
    /// What the ranking counts.
    pub metric: Metric,
    /// Samples resolved to a type (slab, global, per-CPU, stack): the denominator of shares.
    pub resolved_samples: u64,
    /// What the hardware sampler saw, all types together; absent without hardware samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware: Option<HardwareSummary>,
    /// Every type with samples: by misses (with hardware samples), then samples, then peak
    /// live bytes, then name.
    pub types: Vec<TypeProfile>,
    /// Types left out of [`Self::types`] because no sample touched them: only allocated. Their
    /// objects still count in the address set and the working set.
    #[serde(default)]
    pub unsampled_types: u64,
}

/// The hardware sampler's view of the whole profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HardwareSummary {
    /// The hardware samplers that took samples: `ibs`, `pebs`.
    pub samplers: Vec<String>,
    /// Hardware samples of memory operations, resolved or not.
    pub samples: u64,
    /// Of them, resolved to a type and with a hit/miss status: what the statistics below and
    /// every [`TypeHardware`] count.
    pub resolved_samples: u64,
    /// Of those, L1 data-cache misses: the denominator of [`TypeHardware::miss_share`].
    pub misses: u64,
    /// `misses / resolved_samples`.
    pub miss_rate: f64,
    /// Accesses that found the line modified in another core's cache.
    pub hitm: u64,
    /// Samples with a latency.
    pub latency_samples: u64,
    /// Their mean latency in cycles.
    pub mean_latency_cycles: Option<f64>,
    /// Samples whose data address came from the hardware (the others were decoded from the
    /// instruction and its registers).
    pub hardware_addresses: u64,
    /// Of those, samples whose decoded instruction gave another address; the hardware's is
    /// used. PEBS reports registers as they were after the load, so a load that overwrites
    /// its own base register is one.
    pub address_mismatches: u64,
    /// Where the data came from, most samples first.
    pub sources: Vec<SourceCount>,
}

/// What the hardware sampler saw of one type: samples with a hit/miss status only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeHardware {
    /// Hardware samples of the type with a hit/miss status.
    pub samples: u64,
    /// Of them, L1 data-cache misses (a hit on an outstanding miss counts).
    pub misses: u64,
    /// `misses / samples` (0 without samples).
    pub miss_rate: f64,
    /// `misses` / all resolved misses.
    pub miss_share: f64,
    /// Accesses that found the line modified in another core's cache (true or false sharing).
    pub hitm: u64,
    /// Samples with a latency (IBS: loads that missed; PEBS: every sampled load).
    pub latency_samples: u64,
    /// Their mean latency in cycles.
    pub mean_latency_cycles: Option<f64>,
    /// Where the data came from, most samples first; the counts add up to `samples`.
    pub sources: Vec<SourceCount>,
}

impl TypeHardware {
    /// A type the hardware sampler did not see: every count zero.
    pub const NONE: TypeHardware = TypeHardware {
        samples: 0,
        misses: 0,
        miss_rate: 0.0,
        miss_share: 0.0,
        hitm: 0,
        latency_samples: 0,
        mean_latency_cycles: None,
        sources: Vec::new(),
    };
}

/// One data type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeProfile {
    /// 1 for the most sampled type.
    pub rank: usize,
    /// Type name (`task_struct`, `kmalloc-1k@__alloc_skb`, `global:jiffies`, ...).
    pub name: String,
    /// What kind of memory.
    pub kind: TypeKind,
    /// Slab cache name.
    pub cache: Option<String>,
    /// Allocation site (types split by site: generic kmalloc caches, merged pools).
    pub site: Option<String>,
    /// The C struct the type's objects are (from the cache-to-struct table), when known.
    pub struct_name: Option<String>,
    /// Object size from the cache (slab types).
    pub object_size: Option<u32>,
    /// Samples that touched this type.
    pub samples: u64,
    /// `samples` / all resolved samples.
    pub share: f64,
    /// Samples that only read.
    pub reads: u64,
    /// Samples that only wrote.
    pub writes: u64,
    /// Samples that read and wrote (read-modify-write).
    pub read_writes: u64,
    /// Distinct objects touched by samples: object lifetimes for slab types, CPU copies for
    /// per-CPU types, stacks for the stack type, 1 for a global.
    pub objects: u64,
    /// Objects that moved between CPUs within one lifetime: those samples touched from more
    /// than one CPU (a per-CPU copy used from another CPU counts), or, when the type has
    /// object access histories and they show more, the histories with a CPU change (the one
    /// definition the data flow view counts too).
    pub bounced_objects: u64,
    /// `bounced_objects > 0`: the paper's bounce flag.
    pub bounce: bool,
    /// Of the type's object access histories, those with a CPU change; absent without
    /// histories of the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounced_histories: Option<u64>,
    /// Allocations replayed (slab types).
    pub allocs: Option<u64>,
    /// Frees replayed (slab types).
    pub frees: Option<u64>,
    /// Most objects live at once (slab types; objects allocated before collection are not
    /// counted).
    pub peak_live_objects: Option<u64>,
    /// Most bytes live at once (slab types).
    pub peak_live_bytes: Option<u64>,
    /// What the hardware sampler saw; absent without hardware samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware: Option<TypeHardware>,
    /// Functions whose samples touched the type, most first.
    pub functions: Vec<FunctionCount>,
    /// Offsets touched, most sampled first.
    pub fields: Vec<FieldCount>,
    /// CPUs whose samples touched the type, most first.
    pub cpus: Vec<CpuCount>,
}

impl TypeProfile {
    /// What the type is, in short phrases: kind and rank, cache, allocation site, struct,
    /// object size (the line above a type's tables in the report and the browser).
    #[must_use]
    pub fn description(&self) -> Vec<String> {
        let mut what = vec![format!("{} #{}", self.kind.name(), self.rank)];
        if let Some(c) = &self.cache {
            what.push(format!("cache {c}"));
        }
        if let Some(s) = &self.site {
            what.push(format!("allocated in {s}"));
        }
        if let Some(s) = &self.struct_name {
            what.push(format!("struct {s}"));
        }
        if let Some(n) = self.object_size {
            what.push(format!("object size {n}"));
        }
        what
    }
}

/// Samples of one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCount {
    /// Function name, or the address as `0x...` when no symbol covers it.
    pub function: String,
    /// Samples.
    pub samples: u64,
    /// Read-only samples.
    pub reads: u64,
    /// Write-only samples.
    pub writes: u64,
    /// Read-modify-write samples.
    pub read_writes: u64,
    /// Samples a hardware sampler saw miss; absent without hardware samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misses: Option<u64>,
}

/// Samples at one offset of a type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldCount {
    /// Byte offset in the object (or symbol).
    pub offset: u64,
    /// Bytes accessed (of the most sampled instruction at this offset).
    pub size: u32,
    /// Field name (`sk_buff.len`-style path without the struct: `len`, `sk.__sk_common.skc_refcnt`),
    /// when debug info was given and covers the offset.
    pub field: Option<String>,
    /// Samples.
    pub samples: u64,
    /// Read-only samples.
    pub reads: u64,
    /// Write-only samples.
    pub writes: u64,
    /// Read-modify-write samples.
    pub read_writes: u64,
    /// Samples a hardware sampler saw miss; absent without hardware samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misses: Option<u64>,
}

/// Samples on one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCount {
    /// CPU number.
    pub cpu: u32,
    /// Samples.
    pub samples: u64,
}

/// Where a sample went: exactly one bucket per sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Resolved to a slab type through the address set.
    Slab,
    /// An object of a slab cache whose allocation was not traced (allocated before collection,
    /// or free and touched by the allocator), found through its page.
    UntracedSlab,
    /// A global variable.
    Global,
    /// A per-CPU variable.
    Percpu,
    /// A kernel stack.
    Stack,
    /// A named region that is not one C type ([`TypeKind::Region`]): user memory.
    Region,
    /// A data address nothing resolved (e.g. objects allocated before collection in a profile
    /// without page owners).
    UnknownAddress,
    /// The sample ran in user mode.
    UserMode,
    /// The sample ran in the profiler's own module, dprof.ko (its probes, its rings), or in
    /// the kernel for the collector's process (its reads, its perf system calls): not the
    /// workload's work, and not resolved.
    Profiler,
    /// The sample ran in the kernel's own debugging code: sanitizers (KASAN, KFENCE, UBSAN),
    /// lockdep and the other lock and atomic-sleep checks, kmemleak, debugobjects, and the
    /// stack walks they record. The kernel checking itself, not the workload's data accesses:
    /// not resolved, so rankings of types leave it out.
    KernelDebugging,
    /// The instruction has no memory operand.
    NoMemoryOperand,
    /// More memory locations than two, or one per vector element (gathers, scatters, `enter`
    /// with nesting levels). Push/pop, call/ret and string instructions resolve, each of
    /// their one or two locations.
    MultipleMemoryOperands,
    /// `lea`-like: an address computed, no memory accessed.
    AddressOnly,
    /// The bytes do not decode.
    Undecodable,
    /// No instruction bytes were captured.
    NoBytes,
    /// A segment whose base the sample lacks (`%fs`-relative operands).
    UnsupportedSegment,
}

impl Bucket {
    /// Every bucket, in report order.
    pub const ALL: [Self; 16] = [
        Self::Slab,
        Self::UntracedSlab,
        Self::Global,
        Self::Percpu,
        Self::Stack,
        Self::Region,
        Self::UnknownAddress,
        Self::UserMode,
        Self::Profiler,
        Self::KernelDebugging,
        Self::NoMemoryOperand,
        Self::MultipleMemoryOperands,
        Self::AddressOnly,
        Self::Undecodable,
        Self::NoBytes,
        Self::UnsupportedSegment,
    ];

    /// Short name, as the coverage line prints it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slab => "slab",
            Self::UntracedSlab => "slab (allocation untraced)",
            Self::Global => "global",
            Self::Percpu => "percpu",
            Self::Stack => "stack",
            Self::Region => "region",
            Self::UnknownAddress => "unknown address",
            Self::UserMode => "user mode",
            Self::Profiler => "profiler (dprof)",
            Self::KernelDebugging => "kernel debugging (sanitizers, lockdep)",
            Self::NoMemoryOperand => "no memory operand",
            Self::MultipleMemoryOperands => "more than two memory locations",
            Self::AddressOnly => "address only",
            Self::Undecodable => "undecodable",
            Self::NoBytes => "no bytes",
            Self::UnsupportedSegment => "unsupported segment",
        }
    }

    /// Whether samples in this bucket resolved to a type.
    #[must_use]
    pub const fn is_resolved(self) -> bool {
        matches!(
            self,
            Self::Slab
                | Self::UntracedSlab
                | Self::Global
                | Self::Percpu
                | Self::Stack
                | Self::Region
        )
    }

    /// Index in [`Bucket::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Samples in one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BucketCount {
    /// The bucket.
    pub bucket: Bucket,
    /// Samples in it.
    pub samples: u64,
    /// Percent of all samples.
    pub percent: f64,
}

/// Where every sample went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Access samples in the profile.
    pub total_samples: u64,
    /// Samples resolved to a type.
    pub resolved_samples: u64,
    /// Every bucket, in [`Bucket::ALL`] order (zeros included).
    pub buckets: Vec<BucketCount>,
    /// Samples whose instruction touched two memory locations (`push (%rax)`, `movs`, `call
    /// *(%rax)`). A sample is in one bucket, the first of its locations that resolved, but
    /// each location counts for its own type: the types' samples add up to between
    /// `resolved_samples` and that plus these.
    #[serde(default)]
    pub two_location_samples: u64,
    /// Accesses typed from their instruction and the DWARF location of the variable in its
    /// base register (the second resolver), beside their address's type, with the evidence;
    /// absent without debug info (`--vmlinux`). It moves no sample between buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_instruction: Option<crate::instruction_types::InstructionTypes>,
    /// How many samples on data types fell in a named field; absent without debug info.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_named: Option<FieldsNamed>,
    /// One line, like `perf report --type-stat`: `5000 samples: 3100 resolved (62.0%): slab
    /// 50.0%, ...; unresolved: unknown address 8.0%, ...` (buckets with samples only).
    pub summary: String,
}

/// Samples on data types (slab objects, global and per-CPU variables; pseudo-types left
/// out) and how many fell in a named field: a struct's member, a number or pointer variable
/// itself, an array's element.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsNamed {
    /// Samples on data types, by the offsets they touched.
    pub typed_samples: u64,
    /// Of those, samples at an offset that a field name covers.
    pub named_samples: u64,
}

impl Coverage {
    /// Coverage from per-bucket counts indexed by [`Bucket::index`].
    #[must_use]
    pub fn from_counts(counts: &[u64; Bucket::ALL.len()]) -> Self {
        let total: u64 = counts.iter().sum();
        let pct = |n: u64| {
            if total == 0 {
                0.0
            } else {
                n as f64 * 100.0 / total as f64
            }
        };
        let buckets: Vec<BucketCount> = Bucket::ALL
            .iter()
            .zip(counts)
            .map(|(&bucket, &samples)| BucketCount {
                bucket,
                samples,
                percent: pct(samples),
            })
            .collect();
        let resolved: u64 = buckets
            .iter()
            .filter(|b| b.bucket.is_resolved())
            .map(|b| b.samples)
            .sum();
        let part = |resolved_part: bool| {
            buckets
                .iter()
                .filter(|b| b.bucket.is_resolved() == resolved_part && b.samples > 0)
                .map(|b| format!("{} {:.1}%", b.bucket.name(), b.percent))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut summary = format!(
            "{total} samples: {resolved} resolved ({:.1}%)",
            pct(resolved)
        );
        let (res, unres) = (part(true), part(false));
        if !res.is_empty() {
            summary.push_str(": ");
            summary.push_str(&res);
        }
        if !unres.is_empty() {
            summary.push_str("; unresolved: ");
            summary.push_str(&unres);
        }
        Self {
            total_samples: total,
            resolved_samples: resolved,
            buckets,
            two_location_samples: 0,
            by_instruction: None,
            fields_named: None,
            summary,
        }
    }

    /// Adds how many samples on data types fell in a named field ([`Coverage::fields_named`])
    /// and says so in the summary.
    pub fn set_fields_named(&mut self, named: FieldsNamed) {
        use std::fmt::Write as _;
        // Said once, if fields are named twice.
        if self.fields_named.is_none() && named.typed_samples > 0 {
            let _ = write!(
                self.summary,
                "; fields named for {:.1}% of the samples on data types",
                named.named_samples as f64 * 100.0 / named.typed_samples as f64
            );
        }
        self.fields_named = Some(named);
    }

    /// Adds what typing by instruction found ([`Coverage::by_instruction`]) and says so in
    /// the summary.
    #[must_use]
    pub fn with_instruction_types(
        mut self,
        found: crate::instruction_types::InstructionTypes,
    ) -> Self {
        use std::fmt::Write as _;
        let _ = write!(
            self.summary,
            "; typed by instruction: {} samples ({} of them resolved to no type by address)",
            found.typed_samples, found.typed_unknown
        );
        self.by_instruction = Some(found);
        self
    }

    /// Says how many samples touched two memory locations (see
    /// [`Coverage::two_location_samples`]).
    #[must_use]
    pub fn with_two_location_samples(mut self, samples: u64) -> Self {
        use std::fmt::Write as _;
        self.two_location_samples = samples;
        if samples > 0 {
            let _ = write!(
                self.summary,
                "; {samples} samples touched two locations, each counted for its type"
            );
        }
        self
    }

    /// Samples in `bucket`.
    #[must_use]
    pub fn count(&self, bucket: Bucket) -> u64 {
        self.buckets
            .iter()
            .find(|b| b.bucket == bucket)
            .map_or(0, |b| b.samples)
    }
}

/// The address set replay's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSetStats {
    /// Allocations replayed.
    pub allocs: u64,
    /// Frees that ended a live object.
    pub frees: u64,
    /// Frees of addresses not live: allocated before collection, or the allocation was lost.
    pub unknown_frees: u64,
    /// Frees of NULL or `ZERO_SIZE_PTR` (ignored).
    pub null_frees: u64,
    /// Live objects replaced by a new allocation over them (their free was missed).
    pub missed_frees: u64,
    /// Allocations from caches the profile has no `CacheInfo` for.
    pub unknown_cache_allocs: u64,
    /// Objects still live at the end.
    pub live_at_end: u64,
    /// Most objects live at once, all types together.
    pub peak_live_objects: u64,
}

/// How far file order was from time order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderingStats {
    /// Records that arrived after a younger record had been processed (processed late).
    pub late_records: u64,
    /// Records processed early because the reorder buffer was full.
    pub forced_records: u64,
    /// Most records held in the reorder buffer at once.
    pub max_buffered: u64,
    /// The reorder window (ns).
    pub window_ns: u64,
}

/// Something the analysis could not do, or that limits what the report means.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable identifier.
    pub code: WarningCode,
    /// One sentence naming what is missing and what to do.
    pub message: String,
}

/// Warning identifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningCode {
    /// The profile has no access samples.
    NoSamples,
    /// The kallsyms snapshot is empty or has no usable symbols.
    NoKallsyms,
    /// Slab merging was on.
    SlabMerging,
    /// The module dropped records.
    RecordsLost,
    /// Records were processed out of time order.
    OutOfOrder,
    /// Allocations from caches with no `CacheInfo`.
    UnknownCaches,
    /// No per-CPU layout: per-CPU accesses cannot be named.
    NoPercpuLayout,
    /// Many samples hit addresses outside the address set.
    ManyUnknown,
    /// The views need cache geometry and the profile gives none.
    NoCacheGeometry,
}

impl Report {
    /// The type named `name`.
    #[must_use]
    pub fn find_type(&self, name: &str) -> Option<&TypeProfile> {
        self.data_profile.types.iter().find(|t| t.name == name)
    }

    /// Up to `n` type names close to `name` (same prefix, contains it, or a small edit
    /// distance), most similar first: for "unknown type" messages.
    #[must_use]
    pub fn similar_types(&self, name: &str, n: usize) -> Vec<&str> {
        let want = name.to_ascii_lowercase();
        let mut scored: Vec<(usize, &str)> = self
            .data_profile
            .types
            .iter()
            .filter_map(|t| {
                let have = t.name.to_ascii_lowercase();
                let d = edit_distance(&want, &have);
                let close = have.contains(&want)
                    || want.contains(&have)
                    || d <= want.len().max(3) / 3
                    || have
                        .as_bytes()
                        .get(..4)
                        .is_some_and(|p| want.as_bytes().get(..4) == Some(p));
                close.then_some((d, t.name.as_str()))
            })
            .collect();
        scored.sort_unstable();
        scored.into_iter().take(n).map(|(_, s)| s).collect()
    }
}

/// Levenshtein distance over bytes (names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// What kind of memory a type lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypeKind {
    /// Slab objects (and large kmallocs) from the address set.
    Slab,
    /// A kernel global variable (kallsyms data symbol).
    Global,
    /// A per-CPU variable.
    Percpu,
    /// Kernel stacks.
    Stack,
    /// A named region of memory that is not one C type: user memory the kernel touched
    /// (`copy_to_user`, `get_user`).
    Region,
}

impl TypeKind {
    /// Lower-case name, as reports print it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slab => "slab",
            Self::Global => "global",
            Self::Percpu => "percpu",
            Self::Stack => "stack",
            Self::Region => "region",
        }
    }

    /// What one instance of a type of this kind is called, plural: the `objects` a report
    /// counts.
    #[must_use]
    pub const fn instances(self) -> &'static str {
        match self {
            Self::Slab => "objects",
            Self::Percpu => "CPU copies",
            Self::Stack => "stacks",
            Self::Global => "instances",
            Self::Region => "pages",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
