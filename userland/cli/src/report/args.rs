//! The arguments of `dprof report`, and what names a profile's types (shared with `dprof tui`).

use std::path::PathBuf;

use dprof_analysis::views::DEFAULT_SIM_OBJECTS;

/// Show which data types the sampled kernel accesses went to (the data profile).
///
/// Every access sample is decoded (its instruction and registers give the data address) and
/// resolved, in time order, against the address set replayed from the profile's allocations
/// and frees: a slab object (its cache; generic kmalloc caches split by allocation site, e.g.
/// kmalloc-1k@__alloc_skb), a global or per-CPU variable, a kernel stack, or unknown.
///
/// The table ranks types by samples, with their share of resolved samples, objects touched,
/// peak live objects and bytes, the bounce flag (an object touched from more than one CPU
/// within one lifetime; the number of such objects in brackets), the top function and the
/// top offset. The coverage line says where every sample went, resolved or not.
///
/// With a hardware sampler (collect --sampler ibs or pebs), types are ranked by L1 data-cache
/// misses instead, with their share of all misses, the miss rate (misses / hardware samples
/// of the type), the mean latency in cycles (IBS: of loads that missed; PEBS: of every
/// sampled load), HITM (the line was modified in another core's cache) and the top data
/// sources (L1, LFB, L2, L3, near cache, remote cache, DRAM, remote DRAM, ...). A line above
/// the table gives the same for the whole profile, and how many data addresses came from the
/// hardware and disagreed with the decoded instruction (the hardware's is used).
///
/// --type NAME shows one type: its offsets (with field names, see below) with
/// read/write counts (and misses), its functions and its CPUs. --json prints the whole report
/// model.
///
/// --view data-flow shows, for one type (--type, else the type with the most histories), the
/// functions that touched its objects from allocation to free, merged over the object access
/// histories (collect --histories): each function's reads and writes, the steps from one
/// function to the next with how often they were taken, steps where the object moved to
/// another CPU drawn as ==cpu==>, then the execution paths (path traces) with the time since
/// allocation of each access and the samples that hit the same instruction and offsets.
/// Watched ranges show their field names (see below) beside their offsets. A CPU change is a
/// step of a history from alloc to free (an access, or the free) that ran on another CPU than
/// the step before; the header, the edges, the paths, --json and the DOT graph count the same
/// ones. --format dot prints the graph for Graphviz (dot -Tsvg); --json the type's histories.
/// For a type collected with collect --histories full:TYPE, the text lists its merged
/// whole-object paths (each step with its samples) in place of the pairwise path traces,
/// which only --json lists, and --format dot draws the most frequent merged paths beside the
/// graph.
/// A type none of whose histories ran from alloc to free has no graph, and every format says
/// why: a sentence in the text, data_flow.why_empty in --json, a note drawn in place of the
/// graph (and a warning on stderr) with --format dot.
///
/// --view misses classifies each slab type's misses (paper section 3.3): true sharing (another
/// CPU wrote the same bytes before), false sharing (another CPU wrote other bytes of the line,
/// within the object), conflict (the line's associativity set holds more of the type's lines
/// than it has ways, and at least twice the type's mean), capacity (the working set exceeds
/// a cache and the type's lines cover at least half its sets), cannot tell (the line is shared
/// with a neighbour object the history cannot see) and unclassified; the percentages of a type
/// add up to 100%. Sharing is seen in object access histories (collect --histories), with the
/// writing and the missing instruction as evidence. With a hardware sampler the misses it saw
/// are classified; with the software sampler every sample, as the access that would miss
/// (labelled inferred). --type NAME shows the evidence for one type.
///
/// --view working-set shows each slab type's live objects and bytes over time (peak and mean,
/// exact from the address set), the mean number of its lines each cache level holds (a cache
/// simulation driven by the address set and the path traces: --sim-objects N caps the objects
/// simulated, a seeded random share, in caches shrunk alike) and, with --type NAME, the live
/// objects over time and per level the histogram of its distinct lines per associativity set,
/// conflicted sets flagged. --format csv prints the histograms (type, level, lines per set,
/// sets, flagged).
///
/// --view working-set --by-set shows, per cache level, the associativity sets at the level's
/// peak (the moment the live objects of all types touched the most lines), conflicted sets
/// first (more lines than ways and at least twice the mean, all types together), then the
/// sets a type's own histogram flags, then by lines: each set's types with their distinct
/// objects and lines, "flagged" where the type's own histogram flags the set, and the
/// functions that allocated those objects; then the path traces (collect --histories) of
/// watched objects allocated in those functions, or a line saying the profile has none.
/// --top N sets per level (10 by default); the analysis lists at most 256 per level, the
/// busiest, and counts the rest. --type NAME keeps the sets holding that type. --format csv
/// prints one row per level, set, type and allocation site (level, set, set_lines,
/// conflicted, type, objects, type_lines, type_flagged, site, site_objects, paths); --json
/// has them as working_set.by_set.
///
/// Both views use the cache geometry in the profile (sysfs of the profiled machine); --cache
/// NAME=SIZE/WAYS/LINE[,...] replaces or adds levels for what-if analysis: NAME is L1d, L2,
/// L3 (data and unified levels), SIZE in bytes with an optional K or M suffix, WAYS the
/// associativity, LINE the line size; size / (ways x line) must be a power of two, e.g.
/// --cache L1d=48K/12/64,L2=2M/16/64. --json prints the report model with both views
/// (misses, working_set), as plain --json does.
///
/// --view causal ranks the types of a causal session (dprof causal) by their effect on each
/// progress point: every experiment virtually sped up one type's accesses by 0 to 100%; the
/// program speedup (throughput: visits per second of effective time, wall time minus the
/// delay inserted; latency: Little's law from a begin and an end point) of each sped-up
/// experiment against the 0% experiments just before and after it (dprof causal runs each
/// next to a 0% one) is fitted against the virtual speedup by least squares, with an
/// intercept. The table gives per type the slope with its 95% interval, the flags "hurts"
/// (the interval is below 0: speeding the type up slows the program, a sign of contention)
/// and "within noise" (it contains 0), the experiments used, the distinct speedups, the baseline and the type's rank
/// in the data profile of the planning phase; then the experiments left out, by reason, and
/// what the view could not see. --type NAME shows one type's program speedup per virtual
/// speedup. --json prints the causal report; --format coz writes Coz's profile format
/// (selected=TYPE), which Coz's viewer plots. A sped-up experiment during which no sample fell
/// on the type's instructions inserted no delay and is discarded. When no type has a slope
/// (every experiment discarded, or too few speedups), every format says why: a line in the
/// text, why_empty in --json, a warning on stderr with --format coz (whose file would have
/// nothing to plot); the output is still written, and the exit status is 3, so that a script
/// can tell an empty ranking from a failure (1).
///
/// Field names come from the vmlinux of the profiled kernel (--vmlinux, checked against the
/// profile's build id) and, for modules, a directory of their .ko files (--debug-dir); without
/// --vmlinux, from the kernel's BTF that the profile carries (/sys/kernel/btf/vmlinux as
/// collection found it). Cache names map to structs through a built-in table
/// (skbuff_head_cache=sk_buff, TCP=tcp_sock, ...), a cache named like a struct, or
/// --type-map FILE with lines `cache=struct`.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct ReportArgs {
    /// The profile, or a perf.data from perf record (converted first, on the machine that
    /// recorded it: see the README for the perf record command line).
    #[arg(value_name = "FILE")]
    pub(super) file: PathBuf,
    /// Print the report model as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Show one type in detail: fields, functions, CPUs. With --view causal, one entry of the
    /// causal table: a type, or a function or module when the experiments sped up code.
    #[arg(long = "type", value_name = "NAME")]
    pub(super) type_name: Option<String>,
    /// Which view.
    #[arg(long, value_enum, default_value = "data-profile")]
    pub(super) view: View,
    /// Output format: text; Graphviz DOT (--view data-flow); CSV (--view working-set: the
    /// set histograms, or with --by-set the types of each set); Coz's profile format (--view
    /// causal).
    #[arg(long, value_enum, default_value = "text", conflicts_with = "json")]
    pub(super) format: Format,
    /// Cache levels over the profile's, for --view misses, --view working-set and --json:
    /// NAME=SIZE/WAYS/LINE[,...], e.g. L1d=48K/12/64,L2=2M/16/64.
    #[arg(long, value_name = "SPEC")]
    pub(super) cache: Option<String>,
    /// Objects the working set's cache simulation takes at most: with more in the profile, a
    /// seeded random half, quarter, ... of them, in caches with as small a share of their sets.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SIM_OBJECTS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) sim_objects: u64,
    /// --view working-set: the types each associativity set holds, per level, conflicted sets
    /// first (text, or CSV with --format csv).
    #[arg(long)]
    pub(super) by_set: bool,
    #[command(flatten)]
    pub(super) analysis: AnalysisArgs,
    /// Rows per table (types; fields, functions and CPUs of --type; sets per level of
    /// --by-set, 10 by default). Text: 20 by default;
    /// JSON: everything unless given.
    #[arg(long, value_name = "N")]
    pub(super) top: Option<usize>,
}

/// What names a profile's types and fields: shared by `dprof report` and `dprof tui`.
#[derive(Clone, Debug, clap::Args)]
pub struct AnalysisArgs {
    /// vmlinux of the profiled kernel, with debug info: field names (rather than from the
    /// profile's BTF), exact symbol sizes.
    #[arg(long, value_name = "PATH")]
    pub vmlinux: Option<PathBuf>,
    /// Directory holding the profiled modules' .ko files (with debug info).
    #[arg(long, value_name = "DIR", requires = "vmlinux")]
    pub debug_dir: Option<PathBuf>,
    /// Extra cache-to-struct names: lines `cache=struct` (`cache=` for none), # comments.
    #[arg(long, value_name = "FILE")]
    pub type_map: Option<PathBuf>,
}

/// Views `dprof report` can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum View {
    /// Types ranked by samples (paper section 3.1).
    DataProfile,
    /// Functions from alloc to free of one type, from object access histories (section 3.4).
    DataFlow,
    /// Why each type's accesses miss: sharing, conflict, capacity (section 3.3).
    Misses,
    /// Live objects over time, cache residency and set histograms per type; --by-set: the
    /// types of each set (section 3.2).
    WorkingSet,
    /// Types ranked by their effect on progress in causal experiments.
    Causal,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Format {
    /// For the terminal.
    Text,
    /// Graphviz DOT (--view data-flow).
    Dot,
    /// Comma-separated values (--view working-set).
    Csv,
    /// Coz's profile format, for Coz's viewer (--view causal).
    Coz,
}

/// Rows per table in text when --top is not given.
pub(super) const DEFAULT_TOP: usize = 20;
