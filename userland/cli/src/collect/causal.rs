//! `dprof causal`: experiments that rank data types by what speeding up their accesses would
//! do to the workload (Coz's virtual speedups, with a data type as the unit sped up).
//!
//! 1. A profiling phase (`--plan-time`) samples like `dprof collect` and analyses the samples
//!    in place: which types were touched, and by which instructions. The software sampler
//!    sees no data addresses, so the module's O(1) type test is "the sampled ip is one of
//!    the type's instructions": an instruction goes to the type that most of its resolved
//!    samples touched, when that type has at least half of them (an instruction shared by
//!    many types, such as `memcpy`, belongs to none of them and is never sped up).
//! 2. Experiments until the command exits or `--duration` ends, in pairs: one of the chosen
//!    types at random and a virtual speedup of 5% to 100% in 5% steps, next to a 0%
//!    experiment of the same type (so half are 0%, as in Coz), each running for the
//!    experiment length, and the module writes its wall time, inserted
//!    delay and progress visits. An experiment with fewer than `--min-visits` visits of a
//!    progress point doubles the length of the following ones (Coz's rule).
//!
//! The profile holds the profiling phase's records (so `dprof report` shows its data
//! profile) and the experiments' records; its header names the types and progress points
//! they refer to by index.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use dprof_abi::{CausalPlan, ExperimentControl, ExperimentEnd, ProgressPoint, Record};
use dprof_analysis::pipeline::{Analyzer, Options, SampledAccesses};
use dprof_analysis::symbols::Kallsyms;
use dprof_collect::backend::Backend;
use dprof_collect::device::ReadOutcome;
use dprof_collect::samplers;
use dprof_collect::system;
use dprof_format::{
    CausalCollectConfig, CausalTypeSpec, DeviceCounters, ProfileWriter, ProgressPointSpec,
    StopInfo, StopReason,
};
use dprof_model::Report;
use indicatif::ProgressBar;

use super::record::{
    now_unix_s, open_and_configure, parse_period, plan, progress_bar, read_until_drained,
    target_of, usage_error, warn, CollectArgs, Event, PeriodArg, SamplerChoice, Signals, Workload,
    IDLE_SLEEP, PROGRESS_EVERY, READ_BUFFER,
};
use dprof_model::units::{self, format_ns};

/// Run causal experiments on the kernel's data types while a workload runs.
///
/// A profiling phase (--plan-time) finds the most sampled types and the instructions that
/// touch them; then experiments pick a type and a virtual speedup at random (0% half of the
/// time) and delay every other CPU whenever a sample lands on that type's accesses, as if
/// those accesses had become faster. Progress points measure what that does to the
/// workload's throughput (or, with --latency, to the time between two points).
///
/// Progress points:
///   kprobe:FUNCTION           a kernel function's entry (e.g. kprobe:udp_sendmsg)
///   tracepoint:SYSTEM:EVENT   a kernel tracepoint (e.g. tracepoint:net:net_dev_xmit)
///   user:NAME                 a program runs `dprof progress NAME` (or writes NAME to
///                             /dev/dprof through a write-only open) at each unit of work
///
/// Examples:
///   dprof causal -o c.dprof --progress kprobe:udp_sendmsg -- ./udp-bench
///   dprof causal -o c.dprof --types TCP,skbuff_head_cache --progress user:req --duration 5m
///   dprof report --view causal c.dprof            (the ranking; --format coz for Coz's viewer)
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct CausalArgs {
    /// Write the profile to PATH (as PATH.partial until it is complete).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// Run for this long in all, profiling phase included (e.g. 5m), instead of a command.
    #[arg(short, long, value_name = "TIME", value_parser = units::parse_duration)]
    duration: Option<Duration>,
    /// A progress point (see above); repeat for several. At least one, or --latency.
    #[arg(long = "progress", value_name = "POINT", value_parser = parse_point)]
    progress: Vec<ProgressPointSpec>,
    /// Latency mode: the mean time from the BEGIN point to the END point (Little's law).
    #[arg(long, value_name = "BEGIN,END", value_parser = parse_latency)]
    latency: Option<(ProgressPointSpec, ProgressPointSpec)>,
    /// Types to speed up: `auto` (the --top most sampled types of the profiling phase), or
    /// names as `dprof report` shows them, comma-separated.
    #[arg(long, value_name = "TYPES", default_value = "auto", value_parser = parse_types)]
    types: TypeChoice,
    /// With --types auto: how many of the most sampled types.
    #[arg(long, value_name = "N", default_value = "6",
          value_parser = clap::value_parser!(u32).range(1..=dprof_abi::MAX_CAUSAL_TYPES as i64))]
    top: u32,
    /// Length of the profiling phase that chooses the types and their instructions.
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = units::parse_duration)]
    plan_time: Duration,
    /// Length of the first experiment (later ones double while visits are too few).
    #[arg(long, value_name = "TIME", default_value = "200ms", value_parser = parse_experiment_time)]
    experiment: Duration,
    /// An experiment with fewer visits than this of any progress point doubles the length of
    /// the following experiments.
    #[arg(long, value_name = "N", default_value = "5",
          value_parser = clap::value_parser!(u64).range(1..))]
    min_visits: u64,
    /// Pause between experiments, so that one experiment's delays do not spill into the next.
    #[arg(long, value_name = "TIME", default_value = "10ms", value_parser = units::parse_duration)]
    cooloff: Duration,
    /// Seed of the random choice of types and speedups [default: from the clock].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Software sampler: time between samples on each CPU; IBS, PEBS: events (as for
    /// `dprof collect`). Each sample of the chosen type adds speedup x period of delay.
    #[arg(long, value_name = "PERIOD", value_parser = parse_period)]
    period: Option<PeriodArg>,
    /// Which sampler: auto, software, ibs or pebs (as for `dprof collect`).
    #[arg(long, value_name = "SAMPLER", value_enum, default_value = "auto")]
    sampler: SamplerChoice,
    /// Bytes of each per-CPU ring: a power of two from 64K to 256M.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = units::parse_ring_size)]
    ring_size: u32,
    /// The dprof device.
    #[arg(long, value_name = "PATH", default_value = dprof_abi::DEVICE_PATH)]
    device: PathBuf,
    /// The command to run, after `--`; experiments stop when it exits.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// `--types`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeChoice {
    /// The most sampled types.
    Auto,
    /// These, by name.
    Named(Vec<String>),
}

fn parse_types(s: &str) -> Result<TypeChoice, String> {
    if s == "auto" {
        return Ok(TypeChoice::Auto);
    }
    let names: Vec<String> = s.split(',').map(|n| n.trim().to_owned()).collect();
    if names.iter().any(String::is_empty) {
        return Err("an empty type name (give `auto` or names separated by commas)".to_owned());
    }
    if names.len() > dprof_abi::MAX_CAUSAL_TYPES {
        return Err(format!(
            "{} types; the module takes at most {}",
            names.len(),
            dprof_abi::MAX_CAUSAL_TYPES
        ));
    }
    Ok(TypeChoice::Named(names))
}

/// `kprobe:FUNCTION`, `tracepoint:SYSTEM:EVENT` (or `tracepoint:EVENT`) or `user:NAME`.
fn parse_point(s: &str) -> Result<ProgressPointSpec, String> {
    let (kind, name) = s.split_once(':').ok_or_else(|| {
        format!("`{s}` is not KIND:NAME (kprobe:FUNCTION, tracepoint:SYSTEM:EVENT or user:NAME)")
    })?;
    if !matches!(kind, "kprobe" | "tracepoint" | "user") {
        return Err(format!(
            "unknown progress point kind `{kind}` (kprobe, tracepoint or user)"
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

fn parse_latency(s: &str) -> Result<(ProgressPointSpec, ProgressPointSpec), String> {
    let (begin, end) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}` is not BEGIN,END (two progress points)"))?;
    let (begin, end) = (parse_point(begin)?, parse_point(end)?);
    if begin == end {
        return Err("the begin and end points are the same point".to_owned());
    }
    Ok((begin, end))
}

fn parse_experiment_time(s: &str) -> Result<Duration, String> {
    let d = units::parse_duration(s)?;
    if d < MIN_EXPERIMENT {
        return Err(format!(
            "experiments shorter than {} measure mostly noise",
            format_ns(duration_ns(MIN_EXPERIMENT))
        ));
    }
    Ok(d)
}

/// The name the module matches: the event alone for tracepoints (the module looks events up
/// by name; the system is for people).
fn module_point_name<'a>(kind: &str, name: &'a str) -> &'a str {
    if kind == "tracepoint" {
        name.rsplit_once(':').map_or(name, |(_, event)| event)
    } else {
        name
    }
}

fn module_point(spec: &ProgressPointSpec) -> ProgressPoint {
    let kind = match spec.kind.as_str() {
        "kprobe" => dprof_abi::PROGRESS_KPROBE,
        "tracepoint" => dprof_abi::PROGRESS_TRACEPOINT,
        _ => dprof_abi::PROGRESS_USER,
    };
    ProgressPoint::new(kind, module_point_name(&spec.kind, &spec.name).as_bytes())
}

/// Shortest experiment `--experiment` accepts.
const MIN_EXPERIMENT: Duration = Duration::from_millis(10);
/// Coz's doubling rule stops here.
const MAX_EXPERIMENT: Duration = Duration::from_secs(20);
/// A type needs this many samples in the profiling phase for `--types auto` to pick it.
const MIN_PLAN_SAMPLES: u64 = 20;
/// Largest profiling phase kept in memory before the file is written.
const MAX_PLAN_BYTES: usize = 512 << 20;
/// How long to wait for an experiment's end record after `IOC_EXPERIMENT_END`.
const END_RECORD_PATIENCE: Duration = Duration::from_secs(2);

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The progress points in module order, and the latency pair's indices among them.
fn points_of(args: &CausalArgs) -> (Vec<ProgressPointSpec>, Option<(usize, usize)>) {
    let mut points: Vec<ProgressPointSpec> = Vec::new();
    let index_of = |spec: &ProgressPointSpec, points: &mut Vec<ProgressPointSpec>| {
        if let Some(i) = points.iter().position(|p| p == spec) {
            i
        } else {
            points.push(spec.clone());
            points.len() - 1
        }
    };
    for spec in &args.progress {
        index_of(spec, &mut points);
    }
    let latency = args
        .latency
        .as_ref()
        .map(|(b, e)| (index_of(b, &mut points), index_of(e, &mut points)));
    (points, latency)
}

fn check_points(points: &[ProgressPointSpec], symbols: &Kallsyms) -> anyhow::Result<()> {
    if points.is_empty() {
        return Err(usage_error(
            "experiments need a progress point to measure: give --progress (e.g. \
             --progress kprobe:udp_sendmsg) or --latency BEGIN,END",
        ));
    }
    if points.len() > dprof_abi::MAX_PROGRESS_POINTS {
        return Err(usage_error(&format!(
            "{} progress points; the module takes at most {}",
            points.len(),
            dprof_abi::MAX_PROGRESS_POINTS
        )));
    }
    for p in points.iter().filter(|p| p.kind == "kprobe") {
        if !symbols.text_symbols().iter().any(|s| s.name == p.name) {
            return Err(usage_error(&format!(
                "no kernel function named `{}` in /proc/kallsyms (progress point {})",
                p.name,
                p.label()
            )));
        }
    }
    Ok(())
}

/// The `dprof collect` arguments of the profiling phase.
fn collect_args(args: &CausalArgs) -> CollectArgs {
    CollectArgs {
        output: args.output.clone(),
        duration: args.duration,
        ring_size: args.ring_size,
        events: Some(vec![Event::Slab, Event::Samples]),
        period: args.period.clone(),
        sample_user: false,
        sampler: args.sampler,
        histories: None,
        history_rate: 1,
        history_timeout: 1,
        history_max_hits: 1,
        plan_time: args.plan_time,
        kcore: PathBuf::from("/proc/kcore"),
        device: args.device.clone(),
        command: args.command.clone(),
    }
}

fn causal_plan(points: &[ProgressPointSpec], flags: u32) -> CausalPlan {
    let mut plan = CausalPlan {
        struct_size: CausalPlan::SIZE as u32,
        point_count: points.len() as u32,
        flags,
        ..CausalPlan::default()
    };
    for (slot, spec) in plan.points.iter_mut().zip(points) {
        *slot = module_point(spec);
    }
    plan
}

/// A type chosen for experiments, with the instructions the module tests samples against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChosenType {
    pub(crate) spec: CausalTypeSpec,
    pub(crate) ips: Vec<u64>,
}

/// Picks the types and gives each the instructions that mostly touch it.
pub(crate) fn choose_types(
    choice: &TypeChoice,
    top: usize,
    report: &Report,
    accesses: &SampledAccesses,
) -> anyhow::Result<(Vec<ChosenType>, Vec<String>)> {
    let profile = &report.data_profile.types;
    let names: Vec<&str> = match choice {
        TypeChoice::Auto => {
            let names: Vec<&str> = profile
                .iter()
                .filter(|t| t.samples >= MIN_PLAN_SAMPLES)
                .take(top)
                .map(|t| t.name.as_str())
                .collect();
            if names.is_empty() {
                bail!(
                    "no type had {MIN_PLAN_SAMPLES} samples or more in the profiling phase ({} \
                     samples resolved to a type): make --plan-time longer, --period shorter, \
                     or check that the workload runs in the kernel",
                    report.data_profile.resolved_samples
                );
            }
            names
        }
        TypeChoice::Named(names) => {
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
    let mut notes = Vec::new();
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
        chosen.push(ChosenType {
            spec: CausalTypeSpec {
                name: t.name.clone(),
                // A type split by allocation site shares its cache with other sites.
                cache: t.cache.clone().filter(|_| t.site.is_none()),
                ips: ips.len() as u32,
                plan_samples: t.samples,
            },
            ips,
        });
    }
    if chosen.is_empty() {
        bail!("no type is left to experiment on: {}", notes.join("; "));
    }
    Ok((chosen, notes))
}

/// What ends the run, checked between reads.
struct Ending<'a> {
    signals: &'a Signals,
    duration: Option<Duration>,
    start: Instant,
}

impl Ending<'_> {
    fn check(&self, workload: &mut Option<Workload>) -> anyhow::Result<Option<StopReason>> {
        if let Some(signal) = self.signals.which() {
            return Ok(Some(StopReason::Interrupted { signal }));
        }
        if let Some(w) = workload.as_mut() {
            if let Some(status) = w.child.try_wait().context("cannot wait for the command")? {
                w.status = Some(status);
                return Ok(Some(match status.signal() {
                    Some(signal) => StopReason::CommandKilled { signal },
                    None => StopReason::CommandExited {
                        status: status.code().unwrap_or(-1),
                    },
                }));
            }
        }
        if self.duration.is_some_and(|d| self.start.elapsed() >= d) {
            return Ok(Some(StopReason::DurationElapsed));
        }
        Ok(None)
    }
}

/// One read: whole records, or why there are none.
fn read_some<'b, B: Backend>(dev: &mut B, buf: &'b mut [u8]) -> anyhow::Result<Option<&'b [u8]>> {
    Ok(match dev.read(buf)? {
        ReadOutcome::Data(n) => Some(buf.get(..n).unwrap_or(&[])),
        // A 0-byte read while running should not happen; waiting is the safe answer.
        ReadOutcome::Empty | ReadOutcome::Drained => None,
    })
}

/// Reads until the module says drained (after stop), handing whole records to `sink`.
fn drain<B: Backend>(
    dev: &mut B,
    buf: &mut [u8],
    sink: &mut dyn FnMut(&[u8]) -> anyhow::Result<()>,
    progress: &ProgressBar,
) -> anyhow::Result<()> {
    read_until_drained(progress, || {
        let outcome = dev.read(buf)?;
        if let ReadOutcome::Data(n) = outcome {
            sink(buf.get(..n).unwrap_or(&[]))?;
        }
        Ok(outcome)
    })?;
    Ok(())
}

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
#[derive(Default)]
struct Tally {
    done: u32,
    baselines: u32,
    too_few_visits: u32,
    lost_ends: u32,
}

pub fn run(args: &CausalArgs) -> anyhow::Result<ExitCode> {
    let cargs = collect_args(args);
    let target = target_of(&cargs)?;
    let hw = samplers::detect(Path::new("/"));
    plan(&cargs, None, &hw)?;
    let root = Path::new("/");
    let kallsyms = system::kallsyms(root)?;
    let symbols = Kallsyms::parse(&kallsyms);
    let (points, latency) = points_of(args);
    check_points(&points, &symbols)?;
    let labels: Vec<String> = points.iter().map(ProgressPointSpec::label).collect();
    let progress = progress_bar();
    let (mut dev, version, collect_plan, config) =
        open_and_configure(&cargs, &hw, &symbols, &progress)?;
    if version.features & dprof_abi::FEATURE_CAUSAL == 0 {
        bail!("this dprof.ko cannot run causal experiments (no FEATURE_CAUSAL): load a newer one");
    }
    if collect_plan.sampling.is_none() {
        bail!("causal experiments need access samples, and the module offers no sampler here");
    }
    // The plan is set in the profiling phase too, so that a point the kernel does not have
    // fails now; its samples are recorded.
    dev.causal_plan(
        &causal_plan(&points, dprof_abi::CAUSAL_RECORD_SAMPLES),
        &labels,
    )?;
    let collect_config = dprof_format::CollectConfig {
        events: collect_plan
            .events
            .iter()
            .map(|e| e.name().to_owned())
            .collect(),
        ring_bytes: args.ring_size,
        target,
        sampling: collect_plan
            .sampling
            .as_ref()
            .map(super::record::Sampling::header_config),
        histories: None,
        causal: None,
    };
    let mut header = system::gather_header(root, collect_config, version.into(), now_unix_s())
        .context("cannot describe this system in the profile header")?;
    if header.slab_merging {
        warn(
            &progress,
            "slab merging is on (no slab_nomerge on the kernel command line): caches of \
             similar geometry share one name, so some types will be lost",
        );
    }
    let modules = system::modules(root)?;
    let signals = Signals::register()?;
    let mut workload: Option<Workload> = None;
    let result = run_phases(
        args,
        &mut dev,
        &mut header,
        Inputs {
            kallsyms: &kallsyms,
            modules: &modules,
            symbols: &symbols,
            points: &points,
            latency,
            labels: &labels,
            config,
        },
        &signals,
        &progress,
        &mut workload,
    );
    progress.finish_and_clear();
    let path = match result {
        Ok(path) => path,
        Err(e) => {
            let _ = dev.stop();
            if let Some(w) = workload.as_mut() {
                if w.status.is_none() {
                    eprintln!(
                        "dprof: stopping the command (SIGTERM) because the experiments failed"
                    );
                    w.terminate(libc::SIGTERM);
                    let _ = w.child.wait();
                }
            }
            return Err(e);
        }
    };
    eprintln!(
        "dprof: see the ranking with `dprof report --view causal {}`",
        path.display()
    );
    Workload::exit_code_of(workload, &signals)
}

/// What the phases need besides the device and the run's state.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    kallsyms: &'a [u8],
    modules: &'a [u8],
    symbols: &'a Kallsyms,
    points: &'a [ProgressPointSpec],
    latency: Option<(usize, usize)>,
    labels: &'a [String],
    config: dprof_abi::Config,
}

/// The profiling phase, then the experiments; the path of the finished profile.
#[expect(
    clippy::too_many_lines,
    reason = "one sequence of steps, each commented"
)]
fn run_phases<B: Backend>(
    args: &CausalArgs,
    dev: &mut B,
    header: &mut dprof_format::ProfileHeader,
    inputs: Inputs,
    signals: &Signals,
    progress: &ProgressBar,
    workload: &mut Option<Workload>,
) -> anyhow::Result<PathBuf> {
    let mut buf = vec![0u8; READ_BUFFER];
    let ending = Ending {
        signals,
        duration: args.duration,
        start: Instant::now(),
    };

    // 1. The profiling phase, kept in memory: the header can only name the types after it.
    dev.start()?;
    if let Some((program, rest)) = args.command.split_first() {
        let child = std::process::Command::new(program)
            .args(rest)
            .spawn()
            .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
        *workload = Some(Workload {
            child,
            status: None,
        });
    }
    progress.set_message("profiling phase: finding the types and their instructions");
    let mut plan_bytes: Vec<u8> = Vec::new();
    let mut keep = |bytes: &[u8]| -> anyhow::Result<()> {
        if plan_bytes.len() + bytes.len() > MAX_PLAN_BYTES {
            bail!(
                "the profiling phase recorded more than {} MiB: make --plan-time shorter or \
                 --period longer",
                MAX_PLAN_BYTES >> 20
            );
        }
        plan_bytes.extend_from_slice(bytes);
        Ok(())
    };
    while ending.start.elapsed() < args.plan_time {
        if let Some(reason) = ending.check(workload)? {
            bail!(
                "the profiling phase did not finish ({reason}) within --plan-time {}: there is \
                 nothing to experiment on (run the workload longer, or shorten --plan-time)",
                format_ns(duration_ns(args.plan_time))
            );
        }
        match read_some(dev, &mut buf)? {
            Some(bytes) => keep(bytes)?,
            None => std::thread::sleep(IDLE_SLEEP),
        }
    }
    dev.stop()?;
    drain(dev, &mut buf, &mut keep, progress)?;
    let plan_ns = duration_ns(ending.start.elapsed());

    let mut analyzer = Analyzer::new(header, inputs.symbols, &Options::default());
    let mut pos = 0;
    while let Some(rest) = plan_bytes.get(pos..).filter(|r| !r.is_empty()) {
        let (h, record) =
            Record::decode(rest).context("the module returned a record that does not decode")?;
        analyzer.push(&h, &record);
        pos += usize::from(h.size).max(dprof_abi::RECORD_ALIGN);
    }
    let (report, accesses) = analyzer.finish_with_accesses();
    let (types, notes) = choose_types(&args.types, args.top as usize, &report, &accesses)?;
    for note in &notes {
        warn(progress, note);
    }
    let described: Vec<String> = types
        .iter()
        .map(|t| {
            format!(
                "{} ({} samples, {} instructions)",
                t.spec.name,
                t.spec.plan_samples,
                t.ips.len()
            )
        })
        .collect();
    progress.suspend(|| {
        eprintln!(
            "dprof: causal: after {} of profiling, experimenting on {}",
            format_ns(plan_ns),
            described.join(", ")
        );
    });

    // 2. The experiments: samples only (the slab events are not needed), counted but not
    //    recorded.
    let mut config = inputs.config;
    config.events = dprof_abi::EVENT_SAMPLES;
    dev.configure(&config)?;
    dev.causal_plan(&causal_plan(inputs.points, 0), inputs.labels)?;
    for (index, t) in types.iter().enumerate() {
        dev.causal_type(
            index as u32,
            &t.spec.name,
            t.spec.cache.as_deref().unwrap_or(""),
            &t.ips,
        )?;
    }
    header.config.causal = Some(CausalCollectConfig {
        points: inputs.points.to_vec(),
        latency: inputs.latency,
        types: types.iter().map(|t| t.spec.clone()).collect(),
        plan_ns: Some(plan_ns),
        experiment_ns: duration_ns(args.experiment),
        cooloff_ns: duration_ns(args.cooloff),
    });
    let mut writer = ProfileWriter::create(&args.output, header, inputs.kallsyms, inputs.modules)?;
    let outcome = experiments(
        args,
        dev,
        &mut writer,
        &plan_bytes,
        &ending,
        &types,
        progress,
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
            return Err(e.context(format!("the experiments failed ({note})")));
        }
    };
    let device = match dev.status(header.module.nr_cpu_ids as usize) {
        Ok((status, cpus)) => Some(DeviceCounters::from_status(&status, &cpus)),
        Err(e) => {
            warn(
                progress,
                &format!("cannot read the module's final counters: {e}"),
            );
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
    let path = writer.finish(&stop).with_context(|| {
        format!(
            "cannot finish the profile ({} is incomplete)",
            dprof_format::partial_path(&args.output).display()
        )
    })?;
    progress.finish_and_clear();
    eprintln!(
        "dprof: {} experiments ({} at 0%) on {} types, {} with too few visits, {records} records \
         in {} ({}, {})",
        tally.done,
        tally.baselines,
        types.len(),
        tally.too_few_visits,
        path.display(),
        stop.reason,
        format_ns(stop.elapsed_ns)
    );
    if tally.lost_ends > 0 {
        warn(
            progress,
            &format!(
                "{} experiments' end records did not arrive in time (they are read at the end)",
                tally.lost_ends
            ),
        );
    }
    Ok(path)
}

/// Runs experiments until the run ends; the profiling phase's records go to the file first.
#[expect(
    clippy::too_many_arguments,
    clippy::too_many_lines,
    reason = "the loop's whole context, passed once; one loop, its steps commented"
)]
fn experiments<B: Backend>(
    args: &CausalArgs,
    dev: &mut B,
    writer: &mut ProfileWriter,
    plan_bytes: &[u8],
    ending: &Ending,
    types: &[ChosenType],
    progress: &ProgressBar,
    workload: &mut Option<Workload>,
) -> anyhow::Result<(StopReason, Tally)> {
    writer.write_records(plan_bytes)?;
    let mut buf = vec![0u8; READ_BUFFER];
    let mut ends: Vec<ExperimentEnd> = Vec::new();
    // One read, written out and searched for end records; false when there was nothing.
    let mut pump = |dev: &mut B,
                    writer: &mut ProfileWriter,
                    ends: &mut Vec<ExperimentEnd>|
     -> anyhow::Result<bool> {
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
    dev.start()?;
    let reason = 'run: loop {
        // Wait out the cooloff (and the start) while reading.
        let cooloff_end = Instant::now() + args.cooloff;
        while Instant::now() < cooloff_end {
            if let Some(reason) = ending.check(workload)? {
                break 'run reason;
            }
            if !pump(dev, writer, &mut ends)? {
                std::thread::sleep(IDLE_SLEEP.min(args.cooloff));
            }
        }
        // Pairs: a type and a speedup of 5% to 100% at random, run next to a 0% experiment of
        // the same type in random order. Half of the experiments are 0% (Coz), and each
        // sped-up one has a baseline taken under the same conditions: the machine's speed
        // drifts far more over a run than a type's effect.
        let (type_index, speedup_percent) = if let Some(planned) = next.take() {
            planned
        } else {
            let type_index = rng.usize(..types.len());
            let speedup = 5 * rng.u32(1..=20);
            let (first, second) = if rng.bool() {
                (0, speedup)
            } else {
                (speedup, 0)
            };
            next = Some((type_index, second));
            (type_index, first)
        };
        let control = ExperimentControl {
            experiment: tally.done + tally.lost_ends,
            type_index: type_index as u32,
            speedup_percent,
        };
        dev.experiment_start(&control)?;
        let started = Instant::now();
        while started.elapsed() < length {
            // IOC_STOP below ends a running experiment as cut short.
            if let Some(reason) = ending.check(workload)? {
                break 'run reason;
            }
            if !pump(dev, writer, &mut ends)? {
                std::thread::sleep(IDLE_SLEEP);
            }
        }
        dev.experiment_end()?;
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
        let Some(end) = end else {
            tally.lost_ends += 1;
            continue;
        };
        tally.done += 1;
        if speedup_percent == 0 {
            tally.baselines += 1;
        }
        let fewest = end.points[..end.point_count as usize]
            .iter()
            .map(|p| p.visits)
            .min()
            .unwrap_or(0);
        if fewest < args.min_visits {
            tally.too_few_visits += 1;
            if length < MAX_EXPERIMENT {
                length = (length * 2).min(MAX_EXPERIMENT);
            }
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            progress.set_message(format!(
                "experiment {}: {} +{speedup_percent}% for {}, {fewest} visits",
                tally.done,
                types[type_index].spec.name,
                format_ns(duration_ns(length))
            ));
        }
    };
    dev.stop()?;
    let mut buf = vec![0u8; READ_BUFFER];
    drain(
        dev,
        &mut buf,
        &mut |bytes| Ok(writer.write_records(bytes)?),
        progress,
    )?;
    Ok((reason, tally))
}

#[cfg(test)]
mod tests;
