//! What a profile says about itself: the Header section (written before collection starts)
//! and the Stop section (written when it ends). Both are JSON so that fields can be added
//! without a format version bump; readers ignore fields they do not know.

use serde::{Deserialize, Serialize};

/// The Header section: the machine, the kernel and the configuration of a collection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileHeader {
    /// Version of the dprof that collected.
    pub dprof_version: String,
    /// When collection started, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// `uname -r` (from `/proc/sys/kernel/osrelease`).
    pub kernel_release: String,
    /// The kernel's banner (`/proc/version`), which names its build; matched against a
    /// vmlinux's `linux_banner`. `None` in profiles from before it was recorded.
    #[serde(default)]
    pub proc_version: Option<String>,
    /// The kernel's GNU build id (from `/sys/kernel/notes`) as lower-case hex; matched against
    /// a vmlinux's `.notes`. `None` when the kernel has none or the profile predates it.
    #[serde(default)]
    pub build_id: Option<String>,
    /// The kernel's boot command line (`/proc/cmdline`).
    pub cmdline: String,
    /// The first "model name" of `/proc/cpuinfo` ("unknown" when it has none).
    pub cpu_model: String,
    /// Vendor, family and model of the first CPU in `/proc/cpuinfo` (x86): hardware samplers'
    /// quirks depend on them. Absent in profiles of machines that do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_id: Option<CpuId>,
    /// CPUs online (`/sys/devices/system/cpu/online`).
    pub online_cpus: u32,
    /// One entry per distinct CPU cache, from `/sys/devices/system/cpu/cpu*/cache/index*/`.
    pub caches: Vec<CacheGeometry>,
    /// Whether the slab allocator merges caches of similar geometry (no `slab_nomerge` on the
    /// command line): merged caches share one name, so types get lost.
    pub slab_merging: bool,
    /// The slab pools that two or more caches share (from `/sys/kernel/slab`), sorted by
    /// pool: with slab merging on, the name allocations report is one of a pool's aliases,
    /// and the pool holds objects of every alias. Empty when nothing is merged, and in
    /// profiles from before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_caches: Vec<MergedCache>,
    /// Where the kernel put its direct map, vmalloc space and `struct page` array, when the
    /// collector could read it. Absent otherwise, and in profiles from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_layout: Option<MemoryLayout>,
    /// Where the kernel linked its static per-CPU section, when kallsyms does not list it and
    /// the collector found it from the kernel's code and BTF. Absent otherwise, and in
    /// profiles from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percpu_section: Option<PercpuSection>,
    /// Where the kernel image's code, read-only data, data and bss lie (from `/proc/iomem`,
    /// placed at their link addresses), sorted by start: globals that no symbol names still
    /// resolve to their section. Empty when the collector could not see them (not root, or no
    /// such lines), and in profiles from before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_image: Vec<ImageSection>,
    /// How the collection was configured.
    pub config: CollectConfig,
    /// What the module reported (`IOC_VERSION`).
    pub module: ModuleInfo,
}

/// The x86-64 kernel's memory layout (randomised at boot with `CONFIG_RANDOMIZE_MEMORY`): the
/// values of its `page_offset_base`, `vmalloc_base` and `vmemmap_base`, and the size of a
/// `struct page` (from the kernel's BTF).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLayout {
    /// Start of the direct map of all physical memory.
    pub page_offset_base: u64,
    /// Start of the vmalloc space (vmalloc, vmap, ioremap, task stacks).
    pub vmalloc_base: u64,
    /// Start of the array of `struct page`, one per page frame.
    pub vmemmap_base: u64,
    /// Bytes of a `struct page`.
    pub struct_page_size: u64,
}

/// One section of the kernel image, `[start, end)` at its link (virtual) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSection {
    pub kind: ImageSectionKind,
    pub start: u64,
    pub end: u64,
}

/// Which part of the kernel image a section is: the four `/proc/iomem` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageSectionKind {
    /// "Kernel code": `_text` to `_etext`.
    Code,
    /// "Kernel rodata": read-only data, `__ro_after_init` variables among it.
    Rodata,
    /// "Kernel data": initialised data.
    Data,
    /// "Kernel bss": data that starts as zeros.
    Bss,
}

impl ImageSectionKind {
    /// The kind `/proc/iomem` names `name` ("Kernel data"), if any.
    #[must_use]
    pub fn from_iomem_name(name: &str) -> Option<Self> {
        match name {
            "Kernel code" => Some(Self::Code),
            "Kernel rodata" => Some(Self::Rodata),
            "Kernel data" => Some(Self::Data),
            "Kernel bss" => Some(Self::Bss),
            _ => None,
        }
    }
}

/// The static per-CPU section's link addresses, `__per_cpu_start..__per_cpu_end`: on x86-64
/// since Linux 6.15 a per-CPU variable's `%gs:` operand is its address inside this section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercpuSection {
    /// `__per_cpu_start`.
    pub start: u64,
    /// `__per_cpu_end`.
    pub end: u64,
}

/// A slab pool that several caches share: a `:`-named directory of `/sys/kernel/slab` and the
/// cache names linked to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedCache {
    /// The pool's directory name, e.g. `:a-0000192` (its flags and object size).
    pub pool: String,
    /// Every cache name merged into the pool, sorted; the pool's own name (its first
    /// creator's, which allocations report) is one of them.
    pub aliases: Vec<String>,
}

/// One CPU cache as sysfs describes it. Fields sysfs does not provide are `None`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheGeometry {
    /// 1, 2, 3, ...
    pub level: u32,
    /// "Data", "Instruction" or "Unified".
    #[serde(rename = "type")]
    pub cache_type: String,
    /// Total size in bytes.
    pub size_bytes: Option<u64>,
    /// `ways_of_associativity`.
    pub ways: Option<u32>,
    /// `coherency_line_size` in bytes.
    pub line_bytes: Option<u32>,
    /// `number_of_sets`.
    pub sets: Option<u32>,
    /// `shared_cpu_list`: the CPUs that share this cache, e.g. "0-3".
    pub shared_cpu_list: String,
}

/// The collection's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectConfig {
    /// Which collector wrote the records: `module` (`dprof.ko`) or `perf` (perf events on a
    /// stock kernel); absent in profiles written before there was a choice (the module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Event names, e.g. `["slab"]`.
    pub events: Vec<String>,
    /// Bytes of each per-CPU ring.
    pub ring_bytes: u32,
    /// What bounded the collection.
    pub target: Target,
    /// How access samples were taken, with the `samples` event; `None` without it.
    #[serde(default)]
    pub sampling: Option<SamplingConfig>,
    /// Object access histories, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histories: Option<HistoryCollectConfig>,
    /// Causal experiments (`dprof causal`), when asked for: what the `ExperimentStart` and
    /// `ExperimentEnd` records' indices mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal: Option<CausalCollectConfig>,
    /// Which registers of each access sample the profile keeps; absent: all of them.
    #[serde(default, skip_serializing_if = "SampleRegisters::is_all")]
    pub sample_registers: SampleRegisters,
    /// Which registers of each history hit the profile keeps; absent: all of them.
    #[serde(default, skip_serializing_if = "HistoryRegisters::is_all")]
    pub history_registers: HistoryRegisters,
    /// The process id of the `dprof` that collected: kernel samples of it (its reads of the
    /// rings, of `/proc/kcore`, its perf system calls) are the profiler's own work, not the
    /// workload's. Absent in profiles from before it was recorded and in imported ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_pid: Option<u32>,
}

/// Which registers of each access sample a profile keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleRegisters {
    /// Every register, as the collector read it.
    #[default]
    All,
    /// Those the sampled instruction's memory operands are addressed through, and `%rsp`
    /// when it has one; the others read as 0. What the analysis uses, in a fraction of the
    /// bytes.
    Address,
}

impl SampleRegisters {
    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's skip_serializing_if passes a reference"
    )]
    fn is_all(&self) -> bool {
        *self == Self::All
    }
}

/// Which registers of each history hit (`HistoryHit.regs`) a profile keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryRegisters {
    /// Every register, as the trap left them.
    #[default]
    All,
    /// Those the memory operands of the instruction before the trap (the accessing one,
    /// found in the kernel's code from the trap ip) are addressed through, the others read
    /// as 0: what the analysis's cross-check of a hit reads. A hit whose instruction the
    /// collector could not find or decode keeps every register.
    Address,
}

impl HistoryRegisters {
    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's skip_serializing_if passes a reference"
    )]
    fn is_all(&self) -> bool {
        *self == Self::All
    }
}

/// What `dprof causal` set up: the progress points and the type table the experiments' records
/// refer to by index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CausalCollectConfig {
    /// Progress points in the module's plan order (`ExperimentEnd.points` index).
    pub points: Vec<ProgressPointSpec>,
    /// Latency mode: indices in `points` of the begin and the end point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<(usize, usize)>,
    /// With a latency pair: the module weighed its delays by the requests in flight
    /// (`ExperimentEnd::in_flight_delay`, from ABI 9), so the analysis takes the pauses' time
    /// out of the in-flight integral exactly. Absent in older profiles, whose integrals are
    /// scaled by effective over wall time instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_flight_delays: bool,
    /// The type table (`ExperimentControl.type_index` is an index in it): data types, or
    /// with `dprof causal --units functions|modules`, code units.
    pub types: Vec<CausalTypeSpec>,
    /// `--scope` as given: the function and module globs that limited which code units
    /// were candidates; empty when there was none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// The module counted a kernel sample outside the scope for the first caller in it on
    /// its call chain (`IOC_CAUSAL_SCOPE`, from ABI 9): a helper's time went to the function
    /// in scope that called it. Absent without a scope, and in older profiles, whose samples
    /// counted only for the function they fell in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub callers_in_scope: bool,
    /// Length of the profiling phase that chose the types and their instructions (ns); `None`
    /// when none ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_ns: Option<u64>,
    /// Experiment length the collector aimed for at the start (ns); Coz's doubling rule may
    /// lengthen later ones.
    pub experiment_ns: u64,
    /// Pause between experiments (ns).
    pub cooloff_ns: u64,
    /// `dprof causal --fixed-speedup`: every sped-up experiment ran at this virtual speedup
    /// (percent), next to its 0% one; `None` when speedups were drawn at random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_speedup_percent: Option<u32>,
    /// `dprof causal --end-to-end RUNS`: after a profiling run of the command, each
    /// experiment was one whole run of it, from its start to its exit, and the one progress
    /// point ([`END_TO_END_POINT`]) was visited once per run, as it ended; `None` when
    /// experiments were timed slices of one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_runs: Option<u32>,
    /// Whose delay count the module's experiments kept (`dprof causal --delay-accounting`).
    #[serde(default)]
    pub delay_accounting: DelayAccounting,
    /// `dprof causal --arrival`: the index in `points` of the point where requests arrive;
    /// `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<usize>,
    /// `dprof causal --arrival-speedup`: the delay each arrival inserted for every other task
    /// in every experiment (ns), which amplified the load; 0 with none.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub arrival_delay_ns: u64,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// How the module's experiments owed and paid their delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayAccounting {
    /// Per task (Coz's rules for threads): a task woken by an interrupt serves the delays
    /// inserted while it slept; one woken by another task is credited with what that task
    /// served; a forked task starts with its parent's count.
    Task,
    /// Per CPU: a CPU found idle is credited with what it owes. What profiles written before
    /// the choice hold.
    #[default]
    Cpu,
}

/// The progress point of an end-to-end session, as (kind, name): a run of the command that
/// ended.
pub const END_TO_END_POINT: (&str, &str) = ("end-to-end", "run");

/// A progress point as the user named it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressPointSpec {
    /// "kprobe", "tracepoint" or "user".
    pub kind: String,
    /// Function, tracepoint (`system:event`) or user point name.
    pub name: String,
}

impl ProgressPointSpec {
    /// `kind:name`, as `--progress` takes it.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind, self.name)
    }
}

/// What one entry of the causal type table speeds up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CausalUnit {
    /// The accesses to a data type (the instructions that touched it in the profiling
    /// phase); what profiles written before there was a choice hold.
    #[default]
    Type,
    /// Every instruction of a kernel function.
    Function,
    /// The instructions of a module's functions (`vmlinux`: the core kernel).
    Module,
}

impl CausalUnit {
    /// Whether this is [`CausalUnit::Type`] (by reference: serde's `skip_serializing_if`
    /// passes one).
    #[must_use]
    pub fn is_type(&self) -> bool {
        *self == Self::Type
    }

    /// The plural, as `--units` takes it: `types`, `functions`, `modules`.
    #[must_use]
    pub const fn plural(self) -> &'static str {
        match self {
            Self::Type => "types",
            Self::Function => "functions",
            Self::Module => "modules",
        }
    }
}

/// One entry of the causal type table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CausalTypeSpec {
    /// What the entry is; absent for a data type.
    #[serde(default, skip_serializing_if = "CausalUnit::is_type")]
    pub unit: CausalUnit,
    /// The type's name as the data profile names it (e.g. `kmalloc-1k@__alloc_skb`), the
    /// function's name as kallsyms lists it, or the module's (`vmlinux` for the core kernel).
    pub name: String,
    /// A function's loadable module; absent for the core kernel's functions and other units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// A module's functions whose instructions the entry lists, most sampled first (the
    /// module takes at most `MAX_CAUSAL_TYPE_IPS` instructions per entry); empty for other
    /// units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// A module's functions in scope that the instruction cap left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub functions_left_out: u32,
    /// The slab cache the module tests hardware data addresses against; `None` for types that
    /// are not a whole cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// Instruction addresses the module's software type test matches.
    pub ips: u32,
    /// Samples of the type in the profiling phase (its data-profile rank's basis); of a code
    /// unit, the samples on its instructions.
    pub plan_samples: u64,
}

impl CausalTypeSpec {
    /// The entry of a data type: `ips` instructions, `plan_samples` samples in the profiling
    /// phase, and the slab cache the module tests hardware data addresses against, if any.
    #[must_use]
    pub fn data_type(name: &str, cache: Option<String>, ips: u32, plan_samples: u64) -> Self {
        Self {
            unit: CausalUnit::Type,
            name: name.to_owned(),
            module: None,
            functions: Vec::new(),
            functions_left_out: 0,
            cache,
            ips,
            plan_samples,
        }
    }

    /// The entry as people read it (as the causal report's `CausalType::label` writes it): a
    /// type's or a core-kernel function's name, `name [module]` for a module's function,
    /// `[module]` for a module.
    #[must_use]
    pub fn label(&self) -> String {
        match (self.unit, &self.module) {
            (CausalUnit::Module, _) => format!("[{}]", self.name),
            (CausalUnit::Function, Some(module)) => format!("{} [{module}]", self.name),
            _ => self.name.clone(),
        }
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What `dprof collect --histories` asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCollectConfig {
    /// The `--histories` argument: `auto`, or types with their ranges.
    pub spec: String,
    /// Histories started per second at most.
    pub max_per_sec: u32,
    /// Histories end after this many ms.
    pub timeout_ms: u32,
    /// Accesses recorded per history at most.
    pub max_hits: u32,
    /// Length of the sampling phase that chose what to watch; `None` when the types came
    /// with their ranges. Histories' records follow it in the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_ns: Option<u64>,
    /// Types watched over their whole object (`--histories full:TYPE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub full: Vec<FullCoveragePlan>,
}

/// A type watched over its whole object (`--histories full:TYPE`): its object is cut into
/// aligned chunks a debug register can watch, the plan's targets watch up to four chunks each
/// so that every pair of chunks is watched together by one of them, and one complete history
/// of each of those targets makes a *history set* (the paper's section 4.3: pairwise
/// histories merged into one object access history).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullCoveragePlan {
    /// The type's name, as the data profile names it.
    pub type_name: String,
    /// Bytes of its objects (the cache's object size).
    pub object_size: u32,
    /// The plan's targets that watch it (`HistoryStart.target`); their ranges are in the
    /// histories' start records.
    pub targets: Vec<u32>,
}

/// How access samples were taken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingConfig {
    /// The sampler: "software" (cpu-clock with registers and instruction bytes), "ibs" or
    /// "pebs".
    pub sampler: String,
    /// Software sampler: nanoseconds between samples on each CPU; 0 for hardware samplers,
    /// whose period is a count (`period_events`).
    pub period_ns: u32,
    /// Whether user-mode instructions were sampled too (kernel mode always is).
    pub user: bool,
    /// Hardware samplers: events between samples on each CPU, and what they count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_events: Option<PeriodEvents>,
    /// Hardware samplers: the perf event the module opened on each CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmu: Option<PmuEvent>,
}

/// Which CPU the profile was taken on, as x86's `/proc/cpuinfo` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuId {
    /// `vendor_id`: `AuthenticAMD`, `GenuineIntel`, ...
    pub vendor: String,
    /// `cpu family`.
    pub family: u32,
    /// `model`.
    pub model: u32,
}

/// A hardware sampler's period.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodEvents {
    /// Events between samples.
    pub count: u64,
    /// What is counted: "ops" or "cycles" (IBS), "loads" (PEBS).
    pub unit: String,
}

/// The perf event behind a hardware sampler (`perf_event_attr` fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmuEvent {
    /// The PMU's name in sysfs (`ibs_op`, `cpu`, `cpu_core`).
    pub pmu: String,
    /// Its dynamic perf type.
    pub pmu_type: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
}

/// What bounded a collection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// A command run under the collector, until it exited.
    Command {
        /// The command and its arguments.
        argv: Vec<String>,
    },
    /// A fixed time.
    Duration {
        /// The duration in nanoseconds.
        ns: u64,
    },
}

/// The module's `VersionInfo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleInfo {
    /// ABI version of the module.
    pub abi_version: u32,
    /// CPU numbers in records are below this.
    pub nr_cpu_ids: u32,
    /// CPUs online when asked.
    pub online_cpus: u32,
    /// `SAMPLER_*` bits.
    pub samplers: u32,
    /// `FEATURE_*` bits.
    pub features: u32,
    /// Smallest ring the module accepts.
    pub min_ring_bytes: u32,
    /// Largest ring the module accepts.
    pub max_ring_bytes: u32,
    /// Largest record the module writes.
    pub max_record_size: u32,
}

impl From<dprof_abi::VersionInfo> for ModuleInfo {
    fn from(v: dprof_abi::VersionInfo) -> Self {
        Self {
            abi_version: v.abi_version,
            nr_cpu_ids: v.nr_cpu_ids,
            online_cpus: v.online_cpus,
            samplers: v.samplers,
            features: v.features,
            min_ring_bytes: v.min_ring_bytes,
            max_ring_bytes: v.max_ring_bytes,
            max_record_size: v.max_record_size,
        }
    }
}

/// The Stop section: why and when collection stopped, and the module's final counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopInfo {
    /// Why collection stopped.
    pub reason: StopReason,
    /// When, seconds since the Unix epoch.
    pub ended_unix_s: u64,
    /// Nanoseconds from start to stop.
    pub elapsed_ns: u64,
    /// The module's counters after the last read (`IOC_STATUS`), if it answered.
    pub device: Option<DeviceCounters>,
}

/// Why collection stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopReason {
    /// The command exited by itself.
    CommandExited {
        /// Its exit status.
        status: i32,
    },
    /// The command was killed by a signal.
    CommandKilled {
        /// The signal number.
        signal: i32,
    },
    /// The requested duration passed.
    DurationElapsed,
    /// The collector got SIGINT or SIGTERM.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::CommandExited { status } => write!(f, "command exited with status {status}"),
            Self::CommandKilled { signal } => {
                write!(
                    f,
                    "command killed by signal {signal}{}",
                    signal_suffix(signal)
                )
            }
            Self::DurationElapsed => f.write_str("duration elapsed"),
            Self::Interrupted { signal } => {
                write!(f, "interrupted by signal {signal}{}", signal_suffix(signal))
            }
        }
    }
}

/// " (SIGINT)" for the signals people meet here, "" for others.
fn signal_suffix(signal: i32) -> &'static str {
    match signal {
        1 => " (SIGHUP)",
        2 => " (SIGINT)",
        3 => " (SIGQUIT)",
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        13 => " (SIGPIPE)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// The module's counters (`IOC_STATUS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounters {
    /// Records written to all rings.
    pub records_written: u64,
    /// Records dropped on full rings.
    pub records_lost: u64,
    /// Bytes handed to `read()`.
    pub bytes_read: u64,
    /// Per CPU, indexed by CPU number.
    pub cpus: Vec<CpuCounters>,
    /// History counters read after stop (absent in profiles from before histories).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histories: Option<HistoryCounters>,
}

/// The module's history counters after stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCounters {
    /// Histories started (in the last session: a planning phase has its own).
    pub started: u64,
    /// Debug-register traps not recorded: on a CPU still watching a history that had ended.
    pub stray_hits: u64,
    /// (CPU, debug register) pairs still watching an object: must be 0 after stop.
    pub armed_slots: u32,
    /// Debug registers still reserved per CPU: must be 0 after stop.
    pub reserved_slots: u32,
}

/// One CPU's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    /// Records written to this CPU's ring.
    pub records_written: u64,
    /// Records dropped because the ring was full.
    pub records_lost: u64,
}

impl DeviceCounters {
    /// Builds the counters from an `IOC_STATUS` answer.
    #[must_use]
    pub fn from_status(status: &dprof_abi::Status, cpus: &[dprof_abi::CpuStatus]) -> Self {
        Self {
            records_written: status.records_written,
            records_lost: status.records_lost,
            bytes_read: status.bytes_read,
            cpus: cpus
                .iter()
                .map(|c| CpuCounters {
                    records_written: c.records_written,
                    records_lost: c.records_lost,
                })
                .collect(),
            histories: Some(HistoryCounters {
                started: status.histories_started,
                stray_hits: status.stray_hits,
                armed_slots: status.armed_slots,
                reserved_slots: status.reserved_slots,
            }),
        }
    }
}
