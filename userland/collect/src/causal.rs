//! The `dprof causal` driver: experiments that rank data types by what speeding up their accesses would
//! do to the workload (Coz's virtual speedups, with a data type as the unit sped up), or,
//! with `--units functions|modules`, kernel functions or modules by what speeding up their
//! code would do ([`code_units`]).
//!
//! 1. A profiling phase (`--plan-time`) samples like `dprof collect` and analyses the samples
//!    in place: which types were touched, and by which instructions. The software sampler
//!    sees no data addresses, so the module's O(1) type test is "the sampled ip is one of
//!    the type's instructions": an instruction goes to the type that most of its resolved
//!    samples touched, when that type has at least half of them (an instruction shared by
//!    many types, such as `memcpy`, belongs to none of them and is never sped up).
//! 2. Experiments until the command exits or `--duration` ends, in pairs: one of the chosen
//!    types at random and a virtual speedup of 5% to 100% in 5% steps (or always
//!    `--fixed-speedup`'s), next to a 0% experiment of the same type (so half are 0%, as
//!    in Coz), each running for the experiment length, and the module writes its wall
//!    time, inserted delay and progress visits. An experiment with fewer than
//!    `--min-visits` visits of a progress point doubles the length of the following ones
//!    (Coz's rule).
//!
//! With code as the unit, step 1 counts the profiling phase's samples per function instead,
//! and an entry's instructions are all those of its functions (see [`code_units`]).
//!
//! The profile holds the profiling phase's records (so `dprof report` shows its data
//! profile) and the experiments' records; its header names the types (or functions, or
//! modules) and progress points they refer to by index.

//!
//! A run goes [`check`] (nothing opened yet) → [`Checked::open`] (the device configured, no
//! file yet) → [`Experiments::run`] (the command, the phases, the file).

mod code_units;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dprof_abi::{CausalPlan, Config, ExperimentControl, ExperimentEnd, ProgressPoint, Record};
use dprof_analysis::pipeline::{Analyzer, Options, SampledAccesses};
use dprof_analysis::resolve::pseudo_type;
use dprof_analysis::symbols::Kallsyms;
use dprof_format::{
    CausalCollectConfig, CausalTypeSpec, CausalUnit, CollectConfig, DelayAccounting,
    DeviceCounters, ProfileHeader, ProfileWriter, ProgressPointSpec, StopInfo, StopReason, Target,
};
use dprof_model::units::{self, format_ns};
use dprof_model::Report;

use crate::backend::Backend;
use crate::device::{Device, ProgressSignal};
use crate::error::{backend, CollectError};
use crate::kcore::Kcore;
use crate::kernel_btf::KernelBtf;
use crate::observer::{Interrupt, Observer, Progress};
use crate::options::{BackendChoice, CausalOptions, CollectOptions, Event, Selection};
use crate::reading::{drain_into, read_some, IDLE_SLEEP, PROGRESS_EVERY, READ_BUFFER};
use crate::record::{
    create_profile, memory_layout, merging_warning, now_unix_s, open_and_configure, percpu_section,
    target_of, Snapshot,
};
use crate::samplers::{self, HardwareSamplers};
use crate::sampling::{plan, Sampling};
use crate::system;
use crate::workload::{Ending, Workload};
pub use code_units::instruction_starts;
use code_units::{ChosenUnit, MIN_PLAN_SAMPLES};

/// Returns a [`CollectError::CausalTypes`] with the sentence given.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(CollectError::CausalTypes(format!($($arg)*)))
    };
}

/// The options, checked against each other, this machine's samplers and its kernel
/// functions; nothing is opened yet.
#[derive(Debug)]
pub struct Checked<'o> {
    options: &'o CausalOptions,
    collect: CollectOptions,
    target: Target,
    hw: HardwareSamplers,
    kallsyms: Vec<u8>,
    symbols: Kallsyms,
    points: Vec<ProgressPointSpec>,
    latency: Option<(usize, usize)>,
    arrival: Option<usize>,
    labels: Vec<String>,
    /// The scope's code ranges for the module, `None` for a scope of every function.
    scope_ranges: Option<Vec<(u64, u64)>>,
}

/// Checks `options`: what ends the run, the sampler, and the progress points, the scope and
/// the named functions or modules against /proc/kallsyms.
///
/// # Errors
/// [`CollectError::Usage`] for options that contradict each other, a point, function or
/// module the kernel does not have or a scope that holds no function,
/// [`CollectError::Sampler`] for a sampler this machine cannot give, or why /proc/kallsyms
/// cannot be read.
pub fn check(options: &CausalOptions) -> Result<Checked<'_>, CollectError> {
    check_end_to_end(options)?;
    check_arrival(options)?;
    let collect = collect_options(options);
    let target = target_of(&collect)?;
    let hw = samplers::detect(Path::new("/"));
    plan(&collect, None, &hw)?;
    let kallsyms = system::kallsyms(Path::new("/"))?;
    let symbols = Kallsyms::parse(&kallsyms);
    let PointPlan {
        points,
        latency,
        arrival,
    } = points_of(options);
    check_points(&points, &symbols)?;
    code_units::check_units(options.unit, &options.selection, &options.scope, &symbols)?;
    let scope_ranges = code_units::scope_ranges(&options.scope, &symbols)?;
    let labels: Vec<String> = points.iter().map(ProgressPointSpec::label).collect();
    Ok(Checked {
        options,
        collect,
        target,
        hw,
        kallsyms,
        symbols,
        points,
        latency,
        arrival,
        labels,
        scope_ranges,
    })
}

/// A configured device with the progress points set, and the profile header, before the
/// file exists.
pub struct Experiments<'o, B = Device> {
    options: &'o CausalOptions,
    dev: B,
    header: ProfileHeader,
    kallsyms: Vec<u8>,
    symbols: Kallsyms,
    modules: Vec<u8>,
    btf: KernelBtf,
    points: Vec<ProgressPointSpec>,
    latency: Option<(usize, usize)>,
    arrival: Option<usize>,
    labels: Vec<String>,
    scope_ranges: Option<Vec<(u64, u64)>>,
    config: Config,
}

impl<'o> Checked<'o> {
    /// Opens and configures the device, sets the progress points (so that one the kernel
    /// does not have fails now), and describes this system for the profile header.
    ///
    /// # Errors
    /// When the device cannot be opened or configured, the module has no causal
    /// experiments or no sampler, or this system cannot be described.
    pub fn open(self, observer: &mut dyn Observer) -> Result<Experiments<'o>, CollectError> {
        let Self {
            options,
            collect,
            target,
            hw,
            kallsyms,
            symbols,
            points,
            latency,
            arrival,
            labels,
            scope_ranges,
        } = self;
        let (dev, version, collect_plan, config) = open_and_configure(
            Device::open_path(&collect.device)?,
            &collect,
            &hw,
            &symbols,
            observer,
        )?;
        if version.features & dprof_abi::FEATURE_CAUSAL == 0 {
            return Err(CollectError::NoCausal);
        }
        if arrival.is_some() && version.features & dprof_abi::FEATURE_ARRIVALS == 0 {
            return Err(CollectError::NoArrivals);
        }
        if scope_ranges.is_some() && version.features & dprof_abi::FEATURE_CAUSAL_SCOPE == 0 {
            return Err(CollectError::NoCausalScope);
        }
        if collect_plan.sampling.is_none() {
            return Err(CollectError::CausalNeedsSamples);
        }
        // The plan is set in the profiling phase too, so that a point the kernel does not
        // have fails now; its samples are recorded.
        dev.causal_plan(
            &causal_plan(
                &points,
                latency,
                arrival,
                &symbols,
                dprof_abi::CAUSAL_RECORD_SAMPLES | accounting_flags(options.delay_accounting),
            ),
            &labels,
        )?;
        let collect_config = CollectConfig {
            backend: Some("module".to_owned()),
            events: collect_plan
                .events
                .iter()
                .map(|e| e.name().to_owned())
                .collect(),
            ring_bytes: options.ring_size,
            target,
            sampling: collect_plan.sampling.as_ref().map(Sampling::header_config),
            histories: None,
            causal: None,
            sample_registers: dprof_format::SampleRegisters::Address,
            history_registers: dprof_format::HistoryRegisters::All,
            collector_pid: Some(std::process::id()),
        };
        let root = Path::new("/");
        let mut header = system::gather_header(root, collect_config, version.into(), now_unix_s())
            .map_err(CollectError::Header)?;
        if let Some(warning) = merging_warning(&header) {
            observer.warn(&warning);
        }
        let btf = KernelBtf::read(root);
        header.memory_layout =
            memory_layout(root, &kallsyms, &btf, Path::new("/proc/kcore"), observer);
        header.percpu_section = percpu_section(&kallsyms, &btf, Path::new("/proc/kcore"), observer);
        header.kernel_image = system::kernel_image(root, &kallsyms);
        let modules = system::modules(root)?;
        Ok(Experiments {
            options,
            dev,
            header,
            kallsyms,
            symbols,
            modules,
            btf,
            points,
            latency,
            arrival,
            labels,
            scope_ranges,
            config,
        })
    }
}

/// A finished causal profile.
#[derive(Debug)]
pub struct CausalOutcome {
    /// Where it is.
    pub path: PathBuf,
    /// What ended the run, and the module's final counters.
    pub stop: StopInfo,
    /// Records written.
    pub records: u64,
    /// How many types (or functions, or modules) were experimented on.
    pub units: usize,
    /// What they were.
    pub unit: CausalUnit,
    /// The experiments.
    pub tally: Tally,
    /// Time from the start to the experiments: the profiling phase, choosing and setting
    /// the units, creating the file (ns).
    pub startup_ns: u64,
    /// The command, if one ran.
    pub workload: Option<Workload>,
}

impl<B: Backend> Experiments<'_, B> {
    /// Starts the module and the command, runs the profiling phase, chooses the types, then
    /// runs experiments until the command exits, the duration passes or `interrupt` says
    /// so; then finishes the file. On an error the partial file is removed and the command
    /// stopped.
    ///
    /// # Errors
    /// [`CollectError::ExperimentsFailed`] when the experiments failed once the file
    /// existed, or why the profiling phase or the file failed.
    pub fn run(
        self,
        interrupt: Interrupt<'_>,
        observer: &mut dyn Observer,
    ) -> Result<CausalOutcome, CollectError> {
        let Self {
            options,
            mut dev,
            mut header,
            kallsyms,
            symbols,
            modules,
            btf,
            points,
            latency,
            arrival,
            labels,
            scope_ranges,
            config,
        } = self;
        let mut workload: Option<Workload> = None;
        let result = run_phases(
            options,
            &mut dev,
            &mut header,
            Inputs {
                kallsyms: &kallsyms,
                modules: &modules,
                btf: btf.bytes(),
                symbols: &symbols,
                points: &points,
                latency,
                arrival,
                labels: &labels,
                scope_ranges: scope_ranges.as_deref(),
                config,
            },
            interrupt,
            observer,
            &mut workload,
        );
        observer.finished();
        match result {
            Ok(mut outcome) => {
                outcome.workload = workload;
                Ok(outcome)
            }
            Err(e) => {
                let _ = dev.stop();
                if let Some(w) = workload.as_mut() {
                    if !w.has_exited() {
                        observer
                            .say("stopping the command (SIGTERM) because the experiments failed");
                        w.stop_after_failure();
                    }
                }
                Err(e)
            }
        }
    }
}

fn usage(message: &str) -> CollectError {
    CollectError::Usage(message.to_owned())
}

/// The collect options of the profiling phase.
fn collect_options(options: &CausalOptions) -> CollectOptions {
    CollectOptions {
        output: options.output.clone(),
        duration: options.duration,
        ring_size: options.ring_size,
        events: Some(vec![Event::Slab, Event::Samples]),
        period: options.period.clone(),
        sample_user: false,
        sampler: options.sampler,
        histories: None,
        history_rate: 1,
        history_timeout_ms: 1,
        history_max_hits: 1,
        plan_time: options.plan_time,
        kcore: PathBuf::from(KCORE),
        device: options.device.clone(),
        backend: BackendChoice::Module,
        page_events: false,
        command: options.command.clone(),
    }
}

/// Parses a list of types, functions or modules: `auto`, or names separated by commas.
///
/// # Errors
/// A sentence saying why `s` is not such a list.
pub fn parse_selection(s: &str) -> Result<Selection, String> {
    if s == "auto" {
        return Ok(Selection::Auto);
    }
    let names: Vec<String> = s.split(',').map(|n| n.trim().to_owned()).collect();
    if names.iter().any(String::is_empty) {
        return Err("an empty name (give `auto` or names separated by commas)".to_owned());
    }
    if names.len() > dprof_abi::MAX_CAUSAL_TYPES {
        return Err(format!(
            "{} names; the module takes at most {}",
            names.len(),
            dprof_abi::MAX_CAUSAL_TYPES
        ));
    }
    Ok(Selection::Named(names))
}

/// The unit and the selection that `--units` and one of `--types`, `--functions` and
/// `--modules` (`named`: the unit each names, and its list) ask for together: the unit named
/// by either, `types` when neither says, and `auto` without a list.
///
/// # Errors
/// A sentence when `--units` and the list name different units.
pub fn unit_selection(
    units: Option<CausalUnit>,
    named: Option<(CausalUnit, Selection)>,
) -> Result<(CausalUnit, Selection), String> {
    match (units, named) {
        (Some(unit), Some((listed, _))) if unit != listed => Err(format!(
            "--units {} contradicts --{}: give one of them",
            unit.plural(),
            listed.plural()
        )),
        (_, Some((unit, selection))) => Ok((unit, selection)),
        (unit, None) => Ok((unit.unwrap_or_default(), Selection::Auto)),
    }
}

/// Parses a progress point: `kprobe:FUNCTION`, `tracepoint:SYSTEM:EVENT` (or
/// `tracepoint:EVENT`), `user:NAME` or `sampled:FUNCTION`.
///
/// # Errors
/// A sentence saying why `s` is not a progress point.
pub fn parse_point(s: &str) -> Result<ProgressPointSpec, String> {
    let (kind, name) = s.split_once(':').ok_or_else(|| {
        format!(
            "`{s}` is not KIND:NAME (kprobe:FUNCTION, tracepoint:SYSTEM:EVENT, user:NAME or \
             sampled:FUNCTION)"
        )
    })?;
    if !matches!(kind, "kprobe" | "tracepoint" | "user" | "sampled") {
        return Err(format!(
            "unknown progress point kind `{kind}` (kprobe, tracepoint, user or sampled)"
        ));
    }
    let module_name = module_point_name(kind, name);
    if module_name.is_empty()
        || !module_name.bytes().all(|b| b.is_ascii_graphic())
        || name.bytes().any(|b| !b.is_ascii_graphic())
    {
        return Err(format!(
            "progress point `{s}`: the name must be printable ASCII without spaces"
        ));
    }
    if module_name.len() >= dprof_abi::PROGRESS_NAME_BYTES {
        return Err(format!(
            "progress point `{s}`: the name is longer than {} bytes",
            dprof_abi::PROGRESS_NAME_BYTES - 1
        ));
    }
    Ok(ProgressPointSpec {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

/// Parses a latency pair: `BEGIN,END`, two different progress points, neither sampled.
///
/// # Errors
/// A sentence saying why `s` is not such a pair.
pub fn parse_latency(s: &str) -> Result<(ProgressPointSpec, ProgressPointSpec), String> {
    let (begin, end) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}` is not BEGIN,END (two progress points)"))?;
    let (begin, end) = (parse_point(begin)?, parse_point(end)?);
    if begin.kind == "sampled" || end.kind == "sampled" {
        return Err(
            "a latency pair needs counted points (kprobe, tracepoint or user): a sampled point \
             counts samples, not arrivals"
                .to_owned(),
        );
    }
    if begin == end {
        return Err("the begin and end points are the same point".to_owned());
    }
    Ok((begin, end))
}

/// Parses an arrival point: a counted progress point (not sampled: a sample is not a
/// request).
///
/// # Errors
/// A sentence saying why `s` is not such a point.
pub fn parse_arrival(s: &str) -> Result<ProgressPointSpec, String> {
    let point = parse_point(s)?;
    if point.kind == "sampled" {
        return Err(
            "an arrival point is a counted point (kprobe, tracepoint or user): a sampled point \
             counts samples, not requests"
                .to_owned(),
        );
    }
    Ok(point)
}

/// Parses `--arrival-speedup`: a time per arrival (`250us`, `1ms`, `800ns`; a bare number is
/// nanoseconds), above 0 and at most what the module's 32-bit field holds.
///
/// # Errors
/// A sentence saying why `s` is not such a time.
pub fn parse_arrival_speedup(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let ns = if let Some(n) = t.strip_suffix("ns") {
        n.trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?} is not a number of nanoseconds"))?
    } else if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() {
        t.parse::<u64>()
            .map_err(|_| format!("{s:?} is out of range"))?
    } else {
        duration_ns(units::parse_duration(t).map_err(|_| {
            format!("{s:?} is not a time per arrival: use e.g. 250us, 1ms or 800ns (a bare number is ns)")
        })?)
    };
    if ns == 0 {
        return Err(format!(
            "{s:?} is zero: an arrival speedup inserts some delay"
        ));
    }
    if ns > u64::from(u32::MAX) {
        return Err(format!(
            "{s:?} is more than the module takes per arrival ({})",
            format_ns(u64::from(u32::MAX))
        ));
    }
    Ok(ns)
}

/// Parses an experiment length: at least the shortest that measures more than noise.
///
/// # Errors
/// A sentence saying why `s` is not such a length.
pub fn parse_experiment_time(s: &str) -> Result<Duration, String> {
    let d = units::parse_duration(s)?;
    if d < MIN_EXPERIMENT {
        return Err(format!(
            "experiments shorter than {} measure mostly noise",
            format_ns(duration_ns(MIN_EXPERIMENT))
        ));
    }
    Ok(d)
}

/// The user point through which the collector counts an end-to-end session's runs: a name
/// no `--progress user:` point can clash with in the same session (they are exclusive).
const END_TO_END_USER_POINT: &str = "dprof-end-to-end-run";

/// The name the module matches: the event alone for tracepoints (the module looks events up
/// by name; the system is for people); the collector's own user point for an end-to-end
/// run.
fn module_point_name<'a>(kind: &str, name: &'a str) -> &'a str {
    match kind {
        "tracepoint" => name.rsplit_once(':').map_or(name, |(_, event)| event),
        k if k == dprof_format::END_TO_END_POINT.0 => END_TO_END_USER_POINT,
        _ => name,
    }
}

/// The point as the module takes it; `None` for a sampled point whose function `symbols`
/// does not resolve (see [`sampled_range`]; [`check`] refused it already).
fn module_point(spec: &ProgressPointSpec, symbols: &Kallsyms) -> Option<ProgressPoint> {
    let kind = match spec.kind.as_str() {
        "kprobe" => dprof_abi::PROGRESS_KPROBE,
        "tracepoint" => dprof_abi::PROGRESS_TRACEPOINT,
        "sampled" => {
            let range = sampled_range(&spec.name, symbols).ok()?;
            return Some(ProgressPoint::sampled(spec.name.as_bytes(), range));
        }
        _ => dprof_abi::PROGRESS_USER,
    };
    Some(ProgressPoint::new(
        kind,
        module_point_name(&spec.kind, &spec.name).as_bytes(),
    ))
}

/// The code of the kernel function `name` (core kernel or module) that a sampled point
/// counts the samples of: from its kallsyms address to the next symbol's.
///
/// # Errors
/// A sentence when kallsyms has no such function, several functions of that name (a sample
/// could not tell which one is meant), or no next symbol to end it.
fn sampled_range(name: &str, symbols: &Kallsyms) -> Result<std::ops::Range<u64>, String> {
    let mut found = symbols.text_symbols().iter().filter(|s| s.name == name);
    let Some(function) = found.next() else {
        return Err(format!(
            "no kernel function named `{name}` in /proc/kallsyms (progress point sampled:{name})"
        ));
    };
    let others = found.filter(|s| s.address != function.address).count();
    if others > 0 {
        return Err(format!(
            "{} kernel functions are named `{name}` (progress point sampled:{name}); a sampled \
             point needs a function whose name is unique",
            others + 1
        ));
    }
    if function.size == 0 || function.address == 0 {
        return Err(format!(
            "the end of `{name}` is unknown (no symbol follows it in /proc/kallsyms, or its \
             address is hidden: run as root); progress point sampled:{name}"
        ));
    }
    Ok(function.address..function.address.saturating_add(function.size))
}

/// Shortest experiment `--experiment` accepts.
const MIN_EXPERIMENT: Duration = Duration::from_millis(10);
/// Coz's doubling rule stops here.
const MAX_EXPERIMENT: Duration = Duration::from_secs(20);
/// Largest profiling phase kept in memory before the file is written.
const MAX_PLAN_BYTES: usize = 512 << 20;
/// How long to wait for an experiment's end record after `IOC_EXPERIMENT_END`.
const END_RECORD_PATIENCE: Duration = Duration::from_secs(2);

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// End-to-end mode times whole runs of a command, and measures them by their ends alone.
fn check_end_to_end(options: &CausalOptions) -> Result<(), CollectError> {
    if options.end_to_end.is_none() {
        return Ok(());
    }
    if options.command.is_empty() {
        return Err(usage(
            "--end-to-end runs a command several times, one experiment per run: give it after \
             `--`",
        ));
    }
    if !options.progress.is_empty() || options.latency.is_some() {
        return Err(usage(
            "--end-to-end measures each run of the command by its end: it takes no --progress \
             or --latency",
        ));
    }
    if options.duration.is_some() {
        return Err(usage(
            "--end-to-end ends after its runs: it takes no --duration",
        ));
    }
    Ok(())
}

/// `--arrival-speedup` amplifies the arrivals of `--arrival`, which end-to-end runs have not.
fn check_arrival(options: &CausalOptions) -> Result<(), CollectError> {
    if options.arrival_speedup_ns.is_some() && options.arrival.is_none() {
        return Err(usage(
            "--arrival-speedup inserts delays at each arrival: name the point where requests \
             arrive with --arrival",
        ));
    }
    if options.arrival.is_some() && options.end_to_end.is_some() {
        return Err(usage(
            "--end-to-end measures whole runs of the command: it takes no --arrival",
        ));
    }
    Ok(())
}

/// The points of a session in the module's plan order, with the roles some of them play.
struct PointPlan {
    points: Vec<ProgressPointSpec>,
    /// The latency pair's indices in `points`.
    latency: Option<(usize, usize)>,
    /// The arrival point's index in `points`.
    arrival: Option<usize>,
}

/// The progress points in module order, the latency pair's and the arrival point's indices
/// among them; an end-to-end session's one point is the run's end.
fn points_of(options: &CausalOptions) -> PointPlan {
    if options.end_to_end.is_some() {
        let (kind, name) = dprof_format::END_TO_END_POINT;
        let point = ProgressPointSpec {
            kind: kind.to_owned(),
            name: name.to_owned(),
        };
        return PointPlan {
            points: vec![point],
            latency: None,
            arrival: None,
        };
    }
    let mut points: Vec<ProgressPointSpec> = Vec::new();
    let index_of = |spec: &ProgressPointSpec, points: &mut Vec<ProgressPointSpec>| {
        if let Some(i) = points.iter().position(|p| p == spec) {
            i
        } else {
            points.push(spec.clone());
            points.len() - 1
        }
    };
    for spec in &options.progress {
        index_of(spec, &mut points);
    }
    let latency = options
        .latency
        .as_ref()
        .map(|(b, e)| (index_of(b, &mut points), index_of(e, &mut points)));
    let arrival = options.arrival.as_ref().map(|a| index_of(a, &mut points));
    PointPlan {
        points,
        latency,
        arrival,
    }
}

fn check_points(points: &[ProgressPointSpec], symbols: &Kallsyms) -> Result<(), CollectError> {
    if points.is_empty() {
        return Err(usage(
            "experiments need a progress point to measure: give --progress (e.g. \
             --progress kprobe:udp_sendmsg) or --latency BEGIN,END",
        ));
    }
    if points.len() > dprof_abi::MAX_PROGRESS_POINTS {
        return Err(usage(&format!(
            "{} progress points; the module takes at most {}",
            points.len(),
            dprof_abi::MAX_PROGRESS_POINTS
        )));
    }
    for p in points.iter().filter(|p| p.kind == "kprobe") {
        if !symbols.text_symbols().iter().any(|s| s.name == p.name) {
            return Err(usage(&format!(
                "no kernel function named `{}` in /proc/kallsyms (progress point {})",
                p.name,
                p.label()
            )));
        }
    }
    for p in points.iter().filter(|p| p.kind == "sampled") {
        sampled_range(&p.name, symbols).map_err(|why| usage(&why))?;
    }
    Ok(())
}

/// The plan flags that ask the module for `accounting`.
fn accounting_flags(accounting: DelayAccounting) -> u32 {
    match accounting {
        DelayAccounting::Task => 0,
        DelayAccounting::Cpu => dprof_abi::CAUSAL_PER_CPU_DELAYS,
    }
}

/// The module's plan for `points` (the `latency` pair's begin and end, the one at `arrival`
/// where requests arrive), which [`check_points`] accepted against `symbols`.
fn causal_plan(
    points: &[ProgressPointSpec],
    latency: Option<(usize, usize)>,
    arrival: Option<usize>,
    symbols: &Kallsyms,
    flags: u32,
) -> CausalPlan {
    let mut plan = CausalPlan {
        struct_size: CausalPlan::SIZE as u32,
        point_count: points.len() as u32,
        flags,
        arrival: arrival.map_or(0, |i| i as u32 + 1),
        ..CausalPlan::default()
    };
    for (slot, spec) in plan.points.iter_mut().zip(points) {
        // A point that no longer resolves is left unset, so the module refuses the plan.
        *slot = module_point(spec, symbols).unwrap_or_default();
    }
    if let Some((begin, end)) = latency {
        // The module weighs its delays by the pair's requests in flight (see
        // `ExperimentEnd::in_flight_delay`).
        for (index, role) in [
            (begin, dprof_abi::LATENCY_BEGIN),
            (end, dprof_abi::LATENCY_END),
        ] {
            if let Some(point) = plan.points.get_mut(index) {
                point.latency = role;
            }
        }
    }
    plan
}

/// Picks the types and gives each the instructions that mostly touch it.
fn choose_types(
    choice: &Selection,
    top: usize,
    report: &Report,
    accesses: &SampledAccesses,
) -> Result<(Vec<ChosenUnit>, Vec<String>), CollectError> {
    let profile = &report.data_profile.types;
    let mut notes = Vec::new();
    let names: Vec<&str> = match choice {
        Selection::Auto => {
            // The most sampled data types; the pseudo-types ranked among them are skipped,
            // and named in a note.
            let mut names = Vec::new();
            let mut skipped = Vec::new();
            for t in profile.iter().filter(|t| t.samples >= MIN_PLAN_SAMPLES) {
                if names.len() == top {
                    break;
                }
                match pseudo_type(t.kind, &t.name) {
                    Some(what) => skipped.push(format!("{} ({what})", t.name)),
                    None => names.push(t.name.as_str()),
                }
            }
            let skipped = skipped.join(", ");
            if names.is_empty() {
                bail!(
                    "no data type had {MIN_PLAN_SAMPLES} samples or more in the profiling phase \
                     ({} samples resolved to a type{}): make --plan-time longer, --period \
                     shorter, or check that the workload runs in the kernel",
                    report.data_profile.resolved_samples,
                    if skipped.is_empty() {
                        String::new()
                    } else {
                        format!("; pseudo-types skipped: {skipped}")
                    }
                );
            }
            if !skipped.is_empty() {
                notes.push(format!(
                    "skipped pseudo-types, which no change to a data type makes faster: \
                     {skipped} (name them with --types to experiment on them)"
                ));
            }
            names
        }
        Selection::Named(names) => {
            for name in names {
                if !profile.iter().any(|t| &t.name == name) {
                    let known: Vec<&str> =
                        profile.iter().take(10).map(|t| t.name.as_str()).collect();
                    bail!(
                        "type `{name}` was never sampled in the profiling phase, so no \
                         experiment could find its accesses (most sampled: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    );
                }
            }
            names.iter().map(String::as_str).collect()
        }
    };
    // Each instruction goes to the type most of its samples touched, if that is half or more.
    let mut by_ip: BTreeMap<u64, BTreeMap<&str, u64>> = BTreeMap::new();
    for (type_name, ip, samples) in accesses.samples_by_type_and_ip() {
        *by_ip.entry(ip).or_default().entry(type_name).or_default() += samples;
    }
    let mut ips_of: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (ip, per_type) in &by_ip {
        let total: u64 = per_type.values().sum();
        if let Some((&owner, &samples)) = per_type.iter().max_by_key(|&(_, &n)| n) {
            if samples * 2 >= total {
                ips_of.entry(owner).or_default().push((*ip, samples));
            }
        }
    }
    let mut chosen = Vec::new();
    for name in names {
        let Some(t) = profile.iter().find(|t| t.name == name) else {
            continue;
        };
        let mut ips = ips_of.remove(name).unwrap_or_default();
        if ips.is_empty() {
            notes.push(format!(
                "type {name} is left out: every instruction that touched it touches other \
                 types more, so its accesses cannot be told apart"
            ));
            continue;
        }
        // The most sampled instructions, if there are more than the module takes.
        ips.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ips.truncate(dprof_abi::MAX_CAUSAL_TYPE_IPS as usize);
        let mut ips: Vec<u64> = ips.into_iter().map(|(ip, _)| ip).collect();
        ips.sort_unstable();
        // A type split by allocation site shares its cache with other sites.
        let cache = t.cache.clone().filter(|_| t.site.is_none());
        chosen.push(ChosenUnit {
            spec: CausalTypeSpec::data_type(&t.name, cache, ips.len() as u32, t.samples),
            ips,
        });
    }
    if chosen.is_empty() {
        bail!("no type is left to experiment on: {}", notes.join("; "));
    }
    Ok((chosen, notes))
}

/// Chooses what the experiments speed up from the profiling phase's records (`plan_bytes`):
/// types by the data profile's analysis, functions and modules by their samples and their
/// code, read from /proc/kcore. Returns them and notes for the person.
fn choose_units(
    args: &CausalOptions,
    header: &ProfileHeader,
    symbols: &Kallsyms,
    plan_bytes: &[u8],
) -> Result<(Vec<ChosenUnit>, Vec<String>), CollectError> {
    let top = args.top as usize;
    if args.unit == CausalUnit::Type {
        let mut analyzer = Analyzer::new(header, symbols, &Options::default());
        let mut pos = 0;
        while let Some(rest) = plan_bytes.get(pos..).filter(|r| !r.is_empty()) {
            let (h, record) = Record::decode(rest).map_err(CollectError::BadRecord)?;
            analyzer.push(&h, &record);
            pos += usize::from(h.size).max(dprof_abi::RECORD_ALIGN);
        }
        let (report, accesses) = analyzer.finish_with_accesses();
        return choose_types(&args.selection, top, &report, &accesses);
    }
    let samples = code_units::samples_by_function(plan_bytes, symbols)?;
    let kcore = Kcore::open(Path::new(KCORE)).map_err(|e| {
        CollectError::CausalTypes(format!(
            "{e}: experiments on {} read the functions' live code there",
            args.unit.plural()
        ))
    })?;
    let read = |address: u64, len: usize| kcore.read(address, len);
    let (chosen, notes) = if args.unit == CausalUnit::Function {
        code_units::choose_functions(&args.selection, top, &args.scope, symbols, &samples, &read)?
    } else {
        code_units::choose_modules(&args.selection, top, &args.scope, symbols, &samples, &read)?
    };
    // Static functions that share a name are one entry each: named ones may be more.
    if chosen.len() > dprof_abi::MAX_CAUSAL_TYPES {
        bail!(
            "{} functions go by the names given (static functions share names); the module \
             takes at most {} entries: name fewer",
            chosen.len(),
            dprof_abi::MAX_CAUSAL_TYPES
        );
    }
    Ok((chosen, notes))
}

/// Where the kernel's live code is read.
const KCORE: &str = "/proc/kcore";

/// The experiment end records among whole records.
fn experiment_ends(bytes: &[u8], out: &mut Vec<ExperimentEnd>) {
    let mut pos = 0;
    while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
        let Ok((header, record)) = Record::decode(rest) else {
            return; // the writer reports bad records
        };
        if let Record::ExperimentEnd(end) = record {
            out.push(end);
        }
        pos += usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
    }
}

/// The experiment phase's tally, for the progress line and the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Experiments whose end record arrived.
    pub done: u32,
    /// Of those, the ones at 0%.
    pub baselines: u32,
    /// Of those, the ones with too few visits of a progress point.
    pub too_few_visits: u32,
    /// Experiments whose end record did not arrive in time.
    pub lost_ends: u32,
    /// Delay the experiments whose end arrived inserted (ns): what each CPU that did not
    /// run the sped-up code owed, the time the virtual speedups cost the workload.
    pub delay_ns: u64,
    /// Wall time outside the experiments once they began (ns): each experiment's ending
    /// (the module waits for its handlers), its end record, the cooloff and the next start.
    /// The workload runs on through it, measured by no experiment.
    pub between_ns: u64,
}

/// Coz's overhead split for the summary: the time before the first experiment (the
/// profiling phase and the planning after it), the time between experiments (measured by
/// none: what a slow experiment end costs shows here) and the delays the experiments
/// inserted, each against the run's wall time `elapsed_ns`. The sampling's own cost is not
/// apart: it is in every phase, and the 0% experiments against an uninstrumented run
/// measure it.
#[must_use]
pub fn overhead_summary(startup_ns: u64, tally: &Tally, elapsed_ns: u64) -> String {
    let share = |ns: u64| 100.0 * ns as f64 / elapsed_ns.max(1) as f64;
    format!(
        "overhead: startup (profiling phase and planning) {} = {:.1}%, between experiments {} \
         = {:.1}% and delays inserted {} = {:.1}% of {} wall time",
        format_ns(startup_ns),
        share(startup_ns),
        format_ns(tally.between_ns),
        share(tally.between_ns),
        format_ns(tally.delay_ns),
        share(tally.delay_ns),
        format_ns(elapsed_ns)
    )
}

/// What the phases need besides the device and the run's state.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    kallsyms: &'a [u8],
    modules: &'a [u8],
    btf: Option<&'a [u8]>,
    symbols: &'a Kallsyms,
    points: &'a [ProgressPointSpec],
    latency: Option<(usize, usize)>,
    arrival: Option<usize>,
    labels: &'a [String],
    scope_ranges: Option<&'a [(u64, u64)]>,
    config: dprof_abi::Config,
}

/// The profiling phase, then the experiments; the path of the finished profile.
#[expect(
    clippy::too_many_lines,
    reason = "one sequence of steps, each commented"
)]
fn run_phases<B: Backend>(
    args: &CausalOptions,
    dev: &mut B,
    header: &mut ProfileHeader,
    inputs: Inputs,
    interrupt: Interrupt<'_>,
    observer: &mut dyn Observer,
    workload: &mut Option<Workload>,
) -> Result<CausalOutcome, CollectError> {
    let mut buf = vec![0u8; READ_BUFFER];
    let ending = Ending {
        interrupt,
        duration: args.duration,
        start: Instant::now(),
    };

    // 1. The profiling phase, kept in memory: the header can only name the types after it.
    dev.start().map_err(backend)?;
    *workload = Workload::spawn(&args.command)?;
    observer.progress(&Progress::Profiling);
    let mut plan_bytes: Vec<u8> = Vec::new();
    let mut keep = |bytes: &[u8]| -> Result<(), CollectError> {
        if plan_bytes.len() + bytes.len() > MAX_PLAN_BYTES {
            return Err(CollectError::PlanTooLarge {
                mib: MAX_PLAN_BYTES >> 20,
            });
        }
        plan_bytes.extend_from_slice(bytes);
        Ok(())
    };
    while !profiling_done(args, &ending, workload)? {
        match read_some(dev, &mut buf)? {
            Some(bytes) => keep(bytes)?,
            None => std::thread::sleep(IDLE_SLEEP),
        }
    }
    dev.stop().map_err(backend)?;
    drain_into(dev, &mut buf, &mut keep, observer)?;
    let plan_ns = duration_ns(ending.start.elapsed());

    let (types, notes) = choose_units(args, header, inputs.symbols, &plan_bytes)?;
    for note in &notes {
        observer.warn(note);
    }
    let described: Vec<String> = types
        .iter()
        .map(|t| {
            format!(
                "{}{} ({} samples, {} instructions)",
                match t.spec.unit {
                    CausalUnit::Type => "",
                    CausalUnit::Function => "function ",
                    CausalUnit::Module => "module ",
                },
                t.spec.label(),
                t.spec.plan_samples,
                t.ips.len()
            )
        })
        .collect();
    observer.say(&format!(
        "causal: after {} of profiling, experimenting on {}",
        format_ns(plan_ns),
        described.join(", ")
    ));

    // 2. The experiments: samples only (the slab events are not needed), counted but not
    //    recorded.
    let mut config = inputs.config;
    config.events = dprof_abi::EVENT_SAMPLES;
    dev.configure(&config).map_err(backend)?;
    dev.causal_plan(
        &causal_plan(
            inputs.points,
            inputs.latency,
            inputs.arrival,
            inputs.symbols,
            accounting_flags(args.delay_accounting),
        ),
        inputs.labels,
    )
    .map_err(backend)?;
    if let Some(ranges) = inputs.scope_ranges {
        dev.causal_scope(ranges).map_err(backend)?;
    }
    for (index, t) in types.iter().enumerate() {
        dev.causal_type(
            index as u32,
            &t.spec.label(),
            t.spec.cache.as_deref().unwrap_or(""),
            &t.ips,
        )
        .map_err(backend)?;
    }
    header.config.causal = Some(CausalCollectConfig {
        points: inputs.points.to_vec(),
        latency: inputs.latency,
        // This collector's module (ABI 9) weighs every delay of a plan with a pair.
        in_flight_delays: inputs.latency.is_some(),
        types: types.iter().map(|t| t.spec.clone()).collect(),
        scope: args.scope.patterns(),
        callers_in_scope: inputs.scope_ranges.is_some(),
        plan_ns: Some(plan_ns),
        experiment_ns: duration_ns(args.experiment),
        cooloff_ns: duration_ns(args.cooloff),
        fixed_speedup_percent: args.fixed_speedup,
        end_to_end_runs: args.end_to_end,
        delay_accounting: args.delay_accounting,
        arrival: inputs.arrival,
        arrival_delay_ns: args.arrival_speedup_ns.unwrap_or(0),
    });
    let mut writer = create_profile(
        &args.output,
        header,
        &Snapshot {
            kallsyms: inputs.kallsyms,
            symbols: inputs.symbols,
            modules: inputs.modules,
            btf: inputs.btf,
            // No histories: the code is not read.
            kcore: Path::new("/proc/kcore"),
        },
    )?;
    // Startup: the profiling phase, choosing the units, setting them, creating the file.
    let startup_ns = duration_ns(ending.start.elapsed());
    let outcome = experiments(
        args,
        dev,
        &mut writer,
        &plan_bytes,
        &ending,
        &types,
        observer,
        workload,
    );
    let (reason, tally) = match outcome {
        Ok(v) => v,
        Err(e) => {
            let partial = writer.partial().to_path_buf();
            let note = if writer.abandon().is_ok() {
                format!("{} was removed", partial.display())
            } else {
                format!("{} is incomplete", partial.display())
            };
            return Err(CollectError::ExperimentsFailed {
                note,
                source: Box::new(e),
            });
        }
    };
    let device = match dev.status(header.module.nr_cpu_ids as usize) {
        Ok((status, cpus)) => Some(DeviceCounters::from_status(&status, &cpus)),
        Err(e) => {
            observer.warn(&format!("cannot read the module's final counters: {e}"));
            None
        }
    };
    let stop = StopInfo {
        reason,
        ended_unix_s: now_unix_s(),
        elapsed_ns: duration_ns(ending.start.elapsed()),
        device,
    };
    let records = writer.record_count();
    let path = writer
        .finish(&stop)
        .map_err(|source| CollectError::Finish {
            partial: dprof_format::partial_path(&args.output),
            source,
        })?;
    Ok(CausalOutcome {
        path,
        stop,
        records,
        units: types.len(),
        unit: args.unit,
        tally,
        startup_ns,
        workload: None,
    })
}

/// Whether the profiling phase is over: after --plan-time, or, end-to-end, once the first
/// run of the command has succeeded. A run that ends before, or fails, is an error.
fn profiling_done(
    args: &CausalOptions,
    ending: &Ending,
    workload: &mut Option<Workload>,
) -> Result<bool, CollectError> {
    if args.end_to_end.is_some() {
        return match ending.check(workload)? {
            None => Ok(false),
            Some(StopReason::CommandExited { status: 0 }) => Ok(true),
            Some(reason) => Err(CollectError::ProfilingRunFailed { reason }),
        };
    }
    if ending.start.elapsed() >= args.plan_time {
        return Ok(true);
    }
    match ending.check(workload)? {
        None => Ok(false),
        Some(reason) => Err(CollectError::PlanUnfinished {
            reason,
            plan_time: format_ns(duration_ns(args.plan_time)),
        }),
    }
}

/// The next two experiments, as (type index, speedup percent): one of `types` at random, at
/// a speedup of 5% to 100% in 5% steps (or `fixed`), next to a 0% experiment of the same
/// type, in random order. Half of the experiments are 0% (Coz), and each sped-up one has a
/// baseline taken under the same conditions: the machine's speed drifts far more over a run
/// than a type's effect.
fn next_pair(rng: &mut fastrand::Rng, types: usize, fixed: Option<u32>) -> [(usize, u32); 2] {
    let type_index = rng.usize(..types);
    let speedup = fixed.unwrap_or_else(|| 5 * rng.u32(1..=20));
    if rng.bool() {
        [(type_index, 0), (type_index, speedup)]
    } else {
        [(type_index, speedup), (type_index, 0)]
    }
}

/// Runs experiments until the run ends; the profiling phase's records go to the file first.
#[expect(
    clippy::too_many_arguments,
    clippy::too_many_lines,
    reason = "the loop's whole context, passed once; one loop, its steps commented"
)]
fn experiments<B: Backend>(
    args: &CausalOptions,
    dev: &mut B,
    writer: &mut ProfileWriter,
    plan_bytes: &[u8],
    ending: &Ending,
    types: &[ChosenUnit],
    observer: &mut dyn Observer,
    workload: &mut Option<Workload>,
) -> Result<(StopReason, Tally), CollectError> {
    writer.write_records(plan_bytes)?;
    let mut buf = vec![0u8; READ_BUFFER];
    let mut ends: Vec<ExperimentEnd> = Vec::new();
    // One read, written out and searched for end records; false when there was nothing.
    let mut pump = |dev: &mut B,
                    writer: &mut ProfileWriter,
                    ends: &mut Vec<ExperimentEnd>|
     -> Result<bool, CollectError> {
        let Some(bytes) = read_some(dev, &mut buf)? else {
            return Ok(false);
        };
        writer.write_records(bytes)?;
        experiment_ends(bytes, ends);
        Ok(true)
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut length = args.experiment;
    let mut next: Option<(usize, u32)> = None;
    let mut tally = Tally::default();
    let mut last_progress = Instant::now();
    // End-to-end: the runs' ends, counted as a user point the module knows by name.
    let mut run_ends = match args.end_to_end {
        Some(_) => Some(ProgressSignal::open_path(&args.device)?),
        None => None,
    };
    dev.start().map_err(backend)?;
    let reason = 'run: loop {
        if let Some(runs) = args.end_to_end {
            if tally.done + tally.lost_ends >= runs {
                // The last run's end is the session's.
                break 'run StopReason::CommandExited { status: 0 };
            }
            // The run before has ended: only an interrupt ends the cooloff now.
            *workload = None;
        }
        // Wait out the cooloff (and the start) while reading.
        let between_from = Instant::now();
        let cooloff_end = between_from + args.cooloff;
        while Instant::now() < cooloff_end {
            if let Some(reason) = ending.check(workload)? {
                break 'run reason;
            }
            if !pump(dev, writer, &mut ends)? {
                std::thread::sleep(IDLE_SLEEP.min(args.cooloff));
            }
        }
        let (type_index, speedup_percent) = if let Some(planned) = next.take() {
            planned
        } else {
            let [first, second] = next_pair(&mut rng, types.len(), args.fixed_speedup);
            next = Some(second);
            first
        };
        let control = ExperimentControl {
            experiment: tally.done + tally.lost_ends,
            type_index: type_index as u32,
            speedup_percent,
            // parse_arrival_speedup keeps it within u32.
            arrival_delay_ns: args
                .arrival_speedup_ns
                .map_or(0, |ns| u32::try_from(ns).unwrap_or(u32::MAX)),
        };
        dev.experiment_start(&control).map_err(backend)?;
        let started = Instant::now();
        tally.between_ns += duration_ns(started - between_from);
        if let Some(run_ends) = &mut run_ends {
            // One whole run of the command; its exit is the one visit. Between reads the
            // collector sleeps until the command exits: a lag in noticing the exit would be
            // in every run's time and add to its scatter, and frequent wake-ups would take
            // the CPUs from the workload.
            *workload = Workload::spawn(&args.command)?;
            loop {
                match ending.check(workload)? {
                    None => {}
                    Some(StopReason::CommandExited { status: 0 }) => break,
                    // IOC_STOP below ends the running experiment as cut short.
                    Some(reason) => break 'run reason,
                }
                if !pump(dev, writer, &mut ends)? {
                    if let Some(w) = workload.as_ref() {
                        w.wait_for_exit(IDLE_SLEEP);
                    }
                }
            }
            run_ends.signal(END_TO_END_USER_POINT)?;
        } else {
            while started.elapsed() < length {
                // IOC_STOP below ends a running experiment as cut short.
                if let Some(reason) = ending.check(workload)? {
                    break 'run reason;
                }
                if !pump(dev, writer, &mut ends)? {
                    std::thread::sleep(IDLE_SLEEP);
                }
            }
        }
        let ending_from = Instant::now();
        dev.experiment_end().map_err(backend)?;
        let waited = Instant::now();
        let end = loop {
            if let Some(end) = ends.iter().find(|e| e.control == control) {
                break Some(*end);
            }
            if waited.elapsed() > END_RECORD_PATIENCE {
                break None;
            }
            if !pump(dev, writer, &mut ends)? {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        ends.clear();
        tally.between_ns += duration_ns(ending_from.elapsed());
        let Some(end) = end else {
            tally.lost_ends += 1;
            continue;
        };
        tally.done += 1;
        tally.delay_ns = tally.delay_ns.saturating_add(end.delay_ns);
        if speedup_percent == 0 {
            tally.baselines += 1;
        }
        let fewest = end.points[..end.point_count as usize]
            .iter()
            .map(|p| p.visits)
            .min()
            .unwrap_or(0);
        // An end-to-end run is visited once, at its end, whatever its length.
        if fewest < args.min_visits && args.end_to_end.is_none() {
            tally.too_few_visits += 1;
            if length < MAX_EXPERIMENT {
                length = (length * 2).min(MAX_EXPERIMENT);
            }
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            observer.progress(&Progress::Experiment {
                done: tally.done,
                type_name: &types[type_index].spec.label(),
                speedup_percent,
                // An end-to-end experiment lasts as long as its run.
                length: if args.end_to_end.is_some() {
                    started.elapsed()
                } else {
                    length
                },
                fewest_visits: fewest,
            });
        }
    };
    dev.stop().map_err(backend)?;
    let mut buf = vec![0u8; READ_BUFFER];
    drain_into(
        dev,
        &mut buf,
        &mut |bytes| Ok(writer.write_records(bytes)?),
        observer,
    )?;
    Ok((reason, tally))
}

#[cfg(test)]
mod tests;
