//! `dprof report`: the data profile of a profile, as a table, a drill-down into one type, or
//! JSON; the data flow of a type's object access histories ([`data_flow`]); the miss
//! classification ([`misses`]) and the working set ([`working_set`]); the causal ranking
//! ([`causal`]).

mod causal;
mod data_flow;
mod misses;
mod working_set;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use dprof_analysis::cache::parse_overrides;
use dprof_analysis::debuginfo::{DebugInfo, MatchedBy};
use dprof_analysis::pipeline::{self, Options};
use dprof_analysis::report::{annotate_fields, FieldSource, StructNames};
use dprof_analysis::resolve::{SymbolSource, WithDebugInfo};
use dprof_analysis::symbols::Kallsyms;
use dprof_analysis::views::{ViewOptions, DEFAULT_SIM_OBJECTS};
use dprof_format::{Profile, ProfileError};
use dprof_model::cache::{CacheLevel, GeometrySource};
use dprof_model::{
    HardwareSummary, Report, SourceCount, TypeHardware, TypeKind, TypeProfile, WarningCode,
};

use crate::units::format_bytes;

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
/// --type NAME shows one type: its offsets (with field names given --vmlinux) with
/// read/write counts (and misses), its functions and its CPUs. --json prints the whole report
/// model.
///
/// --view data-flow shows, for one type (--type, else the type with the most histories), the
/// functions that touched its objects from allocation to free, merged over the object access
/// histories (collect --histories): each function's reads and writes, the steps from one
/// function to the next with how often they were taken, steps where the object moved to
/// another CPU drawn as ==cpu==>, then the execution paths (path traces) with the time since
/// allocation of each access and the samples that hit the same instruction and offsets.
/// --format dot prints the graph for Graphviz (dot -Tsvg); --json the type's histories.
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
/// (selected=TYPE), which Coz's viewer plots.
///
/// Field names need the vmlinux of the profiled kernel (--vmlinux, checked against the
/// profile's build id) and, for modules, a directory of their .ko files (--debug-dir). Cache
/// names map to structs through a built-in table (skbuff_head_cache=sk_buff, TCP=tcp_sock,
/// ...), a cache named like a struct, or --type-map FILE with lines `cache=struct`.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[allow(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct ReportArgs {
    /// The profile.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print the report model as JSON.
    #[arg(long)]
    json: bool,
    /// Show one type in detail: fields, functions, CPUs.
    #[arg(long = "type", value_name = "NAME")]
    type_name: Option<String>,
    /// Which view.
    #[arg(long, value_enum, default_value = "data-profile")]
    view: View,
    /// Output format: text; Graphviz DOT (--view data-flow); CSV (--view working-set: the
    /// set histograms); Coz's profile format (--view causal).
    #[arg(long, value_enum, default_value = "text", conflicts_with = "json")]
    format: Format,
    /// Cache levels over the profile's, for --view misses, --view working-set and --json:
    /// NAME=SIZE/WAYS/LINE[,...], e.g. L1d=48K/12/64,L2=2M/16/64.
    #[arg(long, value_name = "SPEC")]
    cache: Option<String>,
    /// Objects the working set's cache simulation takes at most: with more in the profile, a
    /// seeded random half, quarter, ... of them, in caches with as small a share of their sets.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SIM_OBJECTS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    sim_objects: u64,
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Rows per table (types; fields, functions and CPUs of --type). Text: 20 by default;
    /// JSON: everything unless given.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
}

/// What names a profile's types and fields: shared by `dprof report` and `dprof tui`.
#[derive(Clone, Debug, clap::Args)]
pub struct AnalysisArgs {
    /// vmlinux of the profiled kernel, with debug info: field names, exact symbol sizes.
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
enum View {
    /// Types ranked by samples (paper section 3.1).
    DataProfile,
    /// Functions from alloc to free of one type, from object access histories (section 3.4).
    DataFlow,
    /// Why each type's accesses miss: sharing, conflict, capacity (section 3.3).
    Misses,
    /// Live objects over time, cache residency and set histograms per type (section 3.2).
    WorkingSet,
    /// Types ranked by their effect on progress in causal experiments.
    Causal,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
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
const DEFAULT_TOP: usize = 20;

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if args.format == Format::Dot && args.view != View::DataFlow {
        bail!("--format dot goes with --view data-flow");
    }
    if args.format == Format::Csv && args.view != View::WorkingSet {
        bail!("--format csv goes with --view working-set");
    }
    if args.format == Format::Coz && args.view != View::Causal {
        bail!("--format coz goes with --view causal");
    }
    let with_views = matches!(args.view, View::Misses | View::WorkingSet)
        || (args.json && args.view == View::DataProfile);
    if !with_views && args.cache.is_some() {
        bail!("--cache goes with --view misses, --view working-set or --json");
    }
    if args.view == View::Causal {
        // The causal view reads the experiment records only: no samples, no symbols.
        let profile = Profile::open(&args.file).map_err(|e| with_file(&args.file, e))?;
        return causal::run(args, &profile);
    }
    let overrides = match &args.cache {
        Some(spec) => parse_overrides(spec).context("--cache")?,
        None => Vec::new(),
    };
    let views = with_views.then(|| ViewOptions {
        overrides,
        sim_objects: usize::try_from(args.sim_objects).unwrap_or(usize::MAX),
        ..ViewOptions::default()
    });
    // Histories stand without samples (samples only add costs to them), and the working set
    // without either; the data profile needs samples.
    let need_samples = args.view == View::DataProfile;
    let Analyzed {
        report,
        have_debug_info,
    } = open_profile(&args.file, &args.analysis)?.analyze(
        need_samples,
        views.as_ref(),
        &mut |_| {},
        &mut |warning| {
            eprintln!("dprof: warning: {warning}");
        },
    )?;
    if args.view == View::DataFlow {
        for w in report
            .warnings
            .iter()
            .filter(|w| w.code != WarningCode::NoSamples)
        {
            eprintln!("dprof: warning: {}", w.message);
        }
        return data_flow::run(args, &report);
    }
    for w in &report.warnings {
        eprintln!("dprof: warning: {}", w.message);
    }
    match args.view {
        View::Misses => return misses::run(args, &report),
        View::WorkingSet => return working_set::run(args, &report),
        View::DataProfile | View::DataFlow | View::Causal => {}
    }
    let selected = match &args.type_name {
        Some(name) => Some(find_type(&report, name)?),
        None => None,
    };

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = match (args.json, selected) {
        (true, selected) => json(&report, selected, args.top, &mut out),
        (false, None) => text(&report, args.top.unwrap_or(DEFAULT_TOP), &mut out),
        (false, Some(t)) => type_text(
            &report,
            t,
            args.top.unwrap_or(DEFAULT_TOP),
            have_debug_info,
            &mut out,
        ),
    }
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other
            .context("cannot write to standard output")
            .map(|()| ExitCode::SUCCESS),
    }
}

/// A profile whose structure was checked, with the names for its types: what `dprof report`
/// and `dprof tui` analyze. Opening reads only the small sections, so a file that is not a
/// profile fails at once, before any slow work (and before `dprof tui` takes the terminal).
pub struct OpenedProfile {
    file: PathBuf,
    profile: Profile,
    names: StructNames,
    args: AnalysisArgs,
}

/// The report of a profile.
pub struct Analyzed {
    pub report: Report,
    /// Whether debug info named the fields (--vmlinux).
    pub have_debug_info: bool,
}

/// What an analysis is doing, for a progress display.
#[derive(Clone, Copy, Debug)]
pub enum Stage {
    /// Reading the DWARF of --vmlinux and --debug-dir.
    DebugInfo,
    /// Reading and analyzing the records.
    Records(pipeline::Progress),
}

/// Opens `file` as a profile and reads --type-map.
pub fn open_profile(file: &Path, args: &AnalysisArgs) -> anyhow::Result<OpenedProfile> {
    let profile = Profile::open(file).map_err(|e| with_file(file, e))?;
    let mut names = StructNames::builtin();
    if let Some(path) = &args.type_map {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the type map {}", path.display()))?;
        names
            .add_user_map(&text)
            .with_context(|| path.display().to_string())?;
    }
    Ok(OpenedProfile {
        file: file.to_path_buf(),
        profile,
        names,
        args: args.clone(),
    })
}

/// A profile error, with the file named unless the error already names it.
fn with_file(file: &Path, e: ProfileError) -> anyhow::Error {
    match e {
        ProfileError::Io { .. } => anyhow::Error::new(e),
        _ => anyhow::Error::new(e).context(file.display().to_string()),
    }
}

impl OpenedProfile {
    /// Whether the profile is a causal session's (its header names the experiments' types).
    pub fn has_causal(&self) -> bool {
        self.profile.header().config.causal.is_some()
    }

    /// Reads the debug info (--vmlinux), analyzes the records and names the fields; a
    /// profile without access samples is an error when `need_samples`.
    /// `progress` hears what is being done; `warn` gets one sentence for each thing that
    /// limits the report beyond the report's own warnings (the caller prints or shows it).
    /// With `views`, the report has the miss classification and working-set views.
    pub fn analyze(
        self,
        need_samples: bool,
        views: Option<&ViewOptions>,
        progress: &mut dyn FnMut(Stage),
        warn: &mut dyn FnMut(String),
    ) -> anyhow::Result<Analyzed> {
        let Self {
            file,
            profile,
            names,
            args,
        } = self;
        let kallsyms = Kallsyms::parse(profile.kallsyms());
        let debug = match &args.vmlinux {
            Some(path) => {
                progress(Stage::DebugInfo);
                Some(load_debug_info(path, &args, &profile, &kallsyms, warn)?)
            }
            None => None,
        };
        let options = Options::default();
        let mut on_records = |p| progress(Stage::Records(p));
        // The records are read and checked during the analysis: a bad one is an error, and no
        // report is made.
        let with_debug = debug.as_ref().map(|d| WithDebugInfo::new(&kallsyms, d));
        let symbols: &dyn SymbolSource = match &with_debug {
            Some(s) => s,
            None => &kallsyms,
        };
        let mut report = match views {
            Some(views) => {
                pipeline::analyze_views(&profile, symbols, &options, views, &mut on_records)
            }
            None => pipeline::analyze_with_progress(&profile, symbols, &options, &mut on_records),
        }
        .map_err(|e| with_file(&file, e))?;
        if need_samples && report.coverage.total_samples == 0 {
            if report.causal.is_some() {
                bail!(
                    "{}: the profile has no access samples, only causal experiments: see them \
                     with dprof report --view causal",
                    file.display()
                );
            }
            bail!(
                "{}: the profile has no access samples: collect with --events samples",
                file.display()
            );
        }
        annotate_fields(
            &mut report,
            &names,
            debug.as_ref().map(|d| d as &dyn FieldSource),
        );
        Ok(Analyzed {
            report,
            have_debug_info: debug.is_some(),
        })
    }
}

fn load_debug_info(
    path: &Path,
    args: &AnalysisArgs,
    profile: &Profile,
    kallsyms: &Kallsyms,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<DebugInfo> {
    let mut debug = DebugInfo::load(path, args.debug_dir.as_deref())?;
    if debug.matches(profile.header())? == MatchedBy::ReleaseOnly {
        warn(format!(
            "the profile records only the kernel release, so {} could not be checked against \
             its banner or build id",
            path.display()
        ));
    }
    // kallsyms lists kprobe and ftrace trampolines as [__builtin__*] modules: no .ko exists.
    let missing: Vec<String> = debug
        .use_kallsyms(kallsyms)?
        .into_iter()
        .filter(|m| !m.starts_with("__builtin__"))
        .collect();
    if !missing.is_empty() {
        let hint = if args.debug_dir.is_some() {
            "no MODULE.ko for them in --debug-dir"
        } else {
            "pass --debug-dir DIR with their MODULE.ko files"
        };
        warn(format!(
            "no debug info for module(s) {}: their fields and source lines stay unnamed ({hint})",
            missing.join(", ")
        ));
    }
    Ok(debug)
}

fn find_type<'r>(report: &'r Report, name: &str) -> anyhow::Result<&'r TypeProfile> {
    if let Some(t) = report.find_type(name) {
        return Ok(t);
    }
    let close = report.similar_types(name, 5);
    if close.is_empty() {
        let top: Vec<&str> = report
            .data_profile
            .types
            .iter()
            .take(5)
            .map(|t| t.name.as_str())
            .collect();
        bail!(
            "no type {name:?} in the profile; the most sampled are: {}",
            top.join(", ")
        );
    }
    bail!(
        "no type {name:?} in the profile; did you mean: {}?",
        close.join(", ")
    );
}

/// The report, or one type of it, with lists cut to `top` entries when given.
fn json(
    report: &Report,
    selected: Option<&TypeProfile>,
    top: Option<usize>,
    out: &mut impl Write,
) -> io::Result<()> {
    let cut = |t: &TypeProfile| {
        let mut t = t.clone();
        if let Some(n) = top {
            t.functions.truncate(n);
            t.fields.truncate(n);
            t.cpus.truncate(n);
        }
        t
    };
    let value = if let Some(t) = selected {
        serde_json::to_value(cut(t))
    } else {
        let mut r = report.clone();
        if let Some(n) = top {
            r.data_profile.types.truncate(n);
            r.unknown_functions.truncate(n);
        }
        r.data_profile.types = r.data_profile.types.iter().map(cut).collect();
        serde_json::to_value(r)
    }
    .map_err(io::Error::other)?;
    serde_json::to_writer_pretty(&mut *out, &value).map_err(io::Error::other)?;
    writeln!(out)
}

/// A table: left-aligned text columns and right-aligned numbers, two spaces apart.
struct Table {
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[(&str, bool)]) -> Self {
        Self {
            right: header.iter().map(|&(_, r)| r).collect(),
            rows: vec![header.iter().map(|&(h, _)| h.to_owned()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut widths = vec![0usize; self.right.len()];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &self.rows {
            let mut line = String::new();
            for (i, (cell, (&w, &right))) in
                row.iter().zip(widths.iter().zip(&self.right)).enumerate()
            {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = w - cell.chars().count();
                if right {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

fn percent(n: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", n as f64 * 100.0 / total as f64)
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn offset_label(f: &dprof_model::FieldCount) -> String {
    match &f.field {
        Some(name) => format!("+{:#x} {name}", f.offset),
        None => format!("+{:#x}", f.offset),
    }
}

fn type_label(t: &TypeProfile) -> String {
    match &t.struct_name {
        Some(s) if *s != t.name => format!("{} ({s})", t.name),
        _ => t.name.clone(),
    }
}

/// Writes to standard output through `write`; a closed pipe (`| head`) is no error.
fn to_stdout(
    write: impl FnOnce(&mut io::BufWriter<io::StdoutLock<'_>>) -> io::Result<()>,
) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other
            .context("cannot write to standard output")
            .map(|()| ExitCode::SUCCESS),
    }
}

/// The report model as JSON.
fn report_json(report: &Report, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
    writeln!(out)
}

/// `caches: L1d 64 KiB 2-way, 64-byte lines, 512 sets (per CPU); ...` with where each came
/// from when --cache changed any.
fn geometry_line(levels: &[CacheLevel], out: &mut impl Write) -> io::Result<()> {
    if levels.is_empty() {
        return writeln!(out, "caches: none known (--cache gives them)");
    }
    let overridden = levels.iter().any(|l| l.source == GeometrySource::Override);
    let parts: Vec<String> = levels
        .iter()
        .map(|l| {
            format!(
                "{} {} ({})",
                l.name,
                l.describe(),
                l.sharing_and_source(overridden)
            )
        })
        .collect();
    writeln!(out, "caches: {}", parts.join("; "))
}

/// The notes of a view, under "could not see".
fn notes_text(notes: &[String], out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "could not see:")?;
    for n in notes {
        writeln!(out, "  - {n}")?;
    }
    Ok(())
}

/// "no type NAME in the VIEW; types there: ..." for a --type the view does not show.
fn no_such_type(name: &str, view: &str, names: &[&str]) -> anyhow::Error {
    let shown: Vec<&str> = names.iter().take(10).copied().collect();
    if shown.is_empty() {
        anyhow::anyhow!("no type {name:?} in the {view}: it shows no type")
    } else {
        anyhow::anyhow!(
            "no type {name:?} in the {view}; types there: {}",
            shown.join(", ")
        )
    }
}

fn header_lines(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let p = &report.profile;
    writeln!(
        out,
        "kernel {}, {} CPUs, {}",
        p.kernel_release, p.online_cpus, p.cpu_model
    )?;
    writeln!(out, "coverage: {}", report.coverage.summary)
}

fn text(report: &Report, top: usize, out: &mut impl Write) -> io::Result<()> {
    header_lines(report, out)?;
    let dp = &report.data_profile;
    if let Some(hw) = &dp.hardware {
        hardware_line(hw, out)?;
        writeln!(out)?;
        hardware_table(report, hw, top, out)?;
        return text_footer(report, top, out);
    }
    writeln!(out)?;
    writeln!(
        out,
        "Data profile: {} types, ranked by samples (software sampler: no miss data)",
        dp.types.len()
    )?;
    let mut table = Table::new(&[
        ("rank", true),
        ("type", false),
        ("samples", true),
        ("share", true),
        ("objects", true),
        ("bounce", false),
        ("peak objs", true),
        ("peak bytes", true),
        ("top function", false),
        ("top offset", false),
    ]);
    for t in dp.types.iter().take(top) {
        let bounce = if t.bounce {
            format!("yes ({})", t.bounced_objects)
        } else {
            "no".to_owned()
        };
        let top_fn = t.functions.first().map_or_else(
            || "-".to_owned(),
            |f| format!("{} {}", f.function, percent(f.samples, t.samples)),
        );
        let top_field = t.fields.first().map_or_else(
            || "-".to_owned(),
            |f| format!("{} {}", offset_label(f), percent(f.samples, t.samples)),
        );
        table.row(vec![
            t.rank.to_string(),
            type_label(t),
            t.samples.to_string(),
            percent(t.samples, dp.resolved_samples),
            t.objects.to_string(),
            bounce,
            opt(t.peak_live_objects),
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
            top_fn,
            top_field,
        ]);
    }
    table.write(out)?;
    text_footer(report, top, out)
}

/// "IBS" or "PEBS" (or both).
fn sampler_names(hw: &HardwareSummary) -> String {
    if hw.samplers.is_empty() {
        return "hardware".to_owned();
    }
    hw.samplers
        .iter()
        .map(|s| s.to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join("+")
}

fn latency_text(mean: Option<f64>) -> String {
    mean.map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"))
}

/// `L1 28.6%, L2 14.3%, L3 14.3%`: the first `n` sources with their share of `total`.
fn sources_text(sources: &[SourceCount], total: u64, n: usize) -> String {
    if sources.is_empty() {
        return "-".to_owned();
    }
    sources
        .iter()
        .take(n)
        .map(|c| format!("{} {}", c.source.name(), percent(c.samples, total)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The profile-wide hardware line under the coverage line.
fn hardware_line(hw: &HardwareSummary, out: &mut impl Write) -> io::Result<()> {
    let latency = match hw.mean_latency_cycles {
        Some(m) => format!(
            "mean latency {m:.1} cycles ({} samples)",
            hw.latency_samples
        ),
        None => "no latencies".to_owned(),
    };
    writeln!(
        out,
        "{}: {} samples of memory accesses, {} resolved with hit/miss data: {} missed L1 ({}), \
         {} HITM, {latency}; {} data addresses from the hardware, {} different from the decoded \
         instruction's",
        sampler_names(hw),
        hw.samples,
        hw.resolved_samples,
        hw.misses,
        percent(hw.misses, hw.resolved_samples),
        hw.hitm,
        hw.hardware_addresses,
        hw.address_mismatches
    )?;
    writeln!(
        out,
        "sources: {}",
        sources_text(&hw.sources, hw.resolved_samples, usize::MAX)
    )
}

/// The data profile ranked by misses.
fn hardware_table(
    report: &Report,
    hw: &HardwareSummary,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let dp = &report.data_profile;
    writeln!(
        out,
        "Data profile: {} types, ranked by L1 data-cache misses ({})",
        dp.types.len(),
        sampler_names(hw)
    )?;
    writeln!(
        out,
        "(share: of all misses; miss rate and sources: of the type's hardware samples; latency: \
         mean cycles; top function and offset: by misses)"
    )?;
    let mut table = Table::new(&[
        ("rank", true),
        ("type", false),
        ("misses", true),
        ("share", true),
        ("miss rate", true),
        ("latency", true),
        ("HITM", true),
        ("samples", true),
        ("objects", true),
        ("bounce", false),
        ("peak bytes", true),
        ("sources", false),
        ("top function", false),
        ("top offset", false),
    ]);
    let none = TypeHardware::NONE;
    for t in dp.types.iter().take(top) {
        let h = t.hardware.as_ref().unwrap_or(&none);
        let bounce = if t.bounce {
            format!("yes ({})", t.bounced_objects)
        } else {
            "no".to_owned()
        };
        let top_fn = t.functions.first().map_or_else(
            || "-".to_owned(),
            |f| {
                format!(
                    "{} {}",
                    f.function,
                    percent(f.misses.unwrap_or(0), h.misses)
                )
            },
        );
        let top_field = t.fields.first().map_or_else(
            || "-".to_owned(),
            |f| {
                format!(
                    "{} {}",
                    offset_label(f),
                    percent(f.misses.unwrap_or(0), h.misses)
                )
            },
        );
        table.row(vec![
            t.rank.to_string(),
            type_label(t),
            h.misses.to_string(),
            percent(h.misses, hw.misses),
            percent(h.misses, h.samples),
            latency_text(h.mean_latency_cycles),
            h.hitm.to_string(),
            t.samples.to_string(),
            t.objects.to_string(),
            bounce,
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
            sources_text(&h.sources, h.samples, 3),
            top_fn,
            top_field,
        ]);
    }
    table.write(out)
}

/// What follows the data profile table: how many rows were left out, the address set, and
/// the unknown addresses.
fn text_footer(report: &Report, top: usize, out: &mut impl Write) -> io::Result<()> {
    let dp = &report.data_profile;
    if dp.types.len() > top {
        writeln!(
            out,
            "... {} more types (--top N shows more)",
            dp.types.len() - top
        )?;
    }
    writeln!(out)?;
    let a = &report.address_set;
    writeln!(
        out,
        "address set: allocations {}, frees {} (+ {} of unknown objects, {} of NULL), missed \
         frees {}; live objects: peak {}, at the end {}",
        a.allocs,
        a.frees,
        a.unknown_frees,
        a.null_frees,
        a.missed_frees,
        a.peak_live_objects,
        a.live_at_end
    )?;
    let unknown = report.coverage.count(dprof_model::Bucket::UnknownAddress);
    if unknown > 0 {
        let fns: Vec<String> = report
            .unknown_functions
            .iter()
            .take(5)
            .map(|f| format!("{} ({})", f.function, f.samples))
            .collect();
        writeln!(
            out,
            "unknown addresses: {unknown} samples, from {}",
            fns.join(", ")
        )?;
    }
    Ok(())
}

fn type_text(
    report: &Report,
    t: &TypeProfile,
    top: usize,
    have_debug: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    type_summary(report, t, out)?;
    type_tables(t, top, have_debug, out)
}

/// The lines about one type above its tables.
fn type_summary(report: &Report, t: &TypeProfile, out: &mut impl Write) -> io::Result<()> {
    header_lines(report, out)?;
    writeln!(out)?;
    let what = t.description();
    writeln!(out, "Type {} ({})", t.name, what.join(", "))?;
    writeln!(
        out,
        "samples: {} ({} of resolved): reads {}, writes {}, read-modify-writes {}",
        t.samples,
        percent(t.samples, report.data_profile.resolved_samples),
        t.reads,
        t.writes,
        t.read_writes
    )?;
    if let Some(h) = &t.hardware {
        type_hardware(report, h, out)?;
    }
    let unit = match t.kind {
        TypeKind::Slab => "objects",
        TypeKind::Percpu => "CPU copies",
        TypeKind::Stack => "stacks",
        TypeKind::Global => "instances",
    };
    writeln!(
        out,
        "{unit} touched: {}, of them touched from more than one CPU: {} (bounce: {})",
        t.objects,
        t.bounced_objects,
        if t.bounce { "yes" } else { "no" }
    )?;
    if t.kind == TypeKind::Slab {
        writeln!(
            out,
            "address set: allocations {}, frees {}; live: peak {} objects, peak {}",
            opt(t.allocs),
            opt(t.frees),
            opt(t.peak_live_objects),
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
        )?;
    }
    Ok(())
}

/// The hardware lines of one type.
fn type_hardware(report: &Report, h: &TypeHardware, out: &mut impl Write) -> io::Result<()> {
    let latency = match h.mean_latency_cycles {
        Some(m) => format!("mean latency {m:.1} cycles ({} samples)", h.latency_samples),
        None => "no latencies".to_owned(),
    };
    let all_misses = report
        .data_profile
        .hardware
        .as_ref()
        .map_or(0, |s| s.misses);
    writeln!(
        out,
        "hardware: {} samples with hit/miss data: {} missed L1 ({} miss rate, {} of all \
         misses), {} HITM, {latency}",
        h.samples,
        h.misses,
        percent(h.misses, h.samples),
        percent(h.misses, all_misses),
        h.hitm,
    )?;
    let sources: Vec<String> = h
        .sources
        .iter()
        .map(|c| {
            format!(
                "{} {} ({})",
                c.source.name(),
                c.samples,
                percent(c.samples, h.samples)
            )
        })
        .collect();
    if sources.is_empty() {
        writeln!(out, "sources: -")
    } else {
        writeln!(out, "sources: {}", sources.join(", "))
    }
}

/// Offsets, functions and CPUs of one type.
fn type_tables(
    t: &TypeProfile,
    top: usize,
    have_debug: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Offsets{}",
        if have_debug {
            ""
        } else {
            " (field names need --vmlinux)"
        }
    )?;
    // With hardware samples: a misses column, and "-" for a size no one knows.
    let hw = t.hardware.is_some();
    let with_misses = |mut cols: Vec<(&'static str, bool)>, at: usize| {
        if hw {
            cols.insert(at, ("misses", true));
        }
        cols
    };
    let misses_cell = |cells: &mut Vec<String>, at: usize, misses: Option<u64>| {
        if hw {
            cells.insert(at, misses.unwrap_or(0).to_string());
        }
    };
    let mut fields = Table::new(&with_misses(
        vec![
            ("offset", false),
            ("size", true),
            ("samples", true),
            ("share", true),
            ("R", true),
            ("W", true),
            ("RW", true),
        ],
        2,
    ));
    for f in t.fields.iter().take(top) {
        let mut cells = vec![
            offset_label(f),
            if hw && f.size == 0 {
                "-".to_owned()
            } else {
                f.size.to_string()
            },
            f.samples.to_string(),
            percent(f.samples, t.samples),
            f.reads.to_string(),
            f.writes.to_string(),
            f.read_writes.to_string(),
        ];
        misses_cell(&mut cells, 2, f.misses);
        fields.row(cells);
    }
    fields.write(out)?;
    more(out, t.fields.len(), top, "offsets")?;
    writeln!(out)?;
    writeln!(out, "Functions")?;
    let mut fns = Table::new(&with_misses(
        vec![
            ("function", false),
            ("samples", true),
            ("share", true),
            ("R", true),
            ("W", true),
            ("RW", true),
        ],
        1,
    ));
    for f in t.functions.iter().take(top) {
        let mut cells = vec![
            f.function.clone(),
            f.samples.to_string(),
            percent(f.samples, t.samples),
            f.reads.to_string(),
            f.writes.to_string(),
            f.read_writes.to_string(),
        ];
        misses_cell(&mut cells, 1, f.misses);
        fns.row(cells);
    }
    fns.write(out)?;
    more(out, t.functions.len(), top, "functions")?;
    writeln!(out)?;
    writeln!(out, "CPUs")?;
    let mut cpus = Table::new(&[("cpu", true), ("samples", true), ("share", true)]);
    for c in t.cpus.iter().take(top) {
        cpus.row(vec![
            c.cpu.to_string(),
            c.samples.to_string(),
            percent(c.samples, t.samples),
        ]);
    }
    cpus.write(out)?;
    more(out, t.cpus.len(), top, "CPUs")
}

fn more(out: &mut impl Write, len: usize, top: usize, what: &str) -> io::Result<()> {
    if len > top {
        writeln!(out, "... {} more {what} (--top N shows more)", len - top)?;
    }
    Ok(())
}
