//! `dprof collect`: its arguments, progress and messages around
//! [`dprof_collect::record`], and what `dprof causal` shares with it (the terminal, the
//! signals, usage errors and exit codes).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use dprof_collect::error::CollectError;
use dprof_collect::histories;
use dprof_collect::observer::{Observer, Progress};
use dprof_collect::options::{self, parse_period, CollectOptions, Period};
use dprof_collect::record::{self, Recorded};
use dprof_collect::workload::Workload;
use indicatif::{ProgressBar, ProgressStyle};

use dprof_model::units::{self, format_bytes, format_ns};

/// Collect a profile from the dprof kernel module into a file.
///
/// Opens /dev/dprof (load the module first: `insmod dprof.ko`; needs root), checks the
/// module's ABI version, configures it, snapshots the system (kernel release, boot command
/// line, CPU model, cache geometry, /proc/kallsyms, /proc/modules) into the profile header,
/// then collects until either CMD exits or --duration passes; exactly one of the two must be
/// given. Ctrl-C (SIGINT) or SIGTERM stops early and still finishes the profile; a second one
/// exits at once, leaving only PATH.partial.
///
/// Events: `slab` (allocations, frees and slab caches) and `samples` (access samples: every
/// --period on each CPU, the sampled instruction with its registers and bytes, from which
/// analysis computes the data address). Without --events, both are collected when the module
/// has a sampler, else slab only (with a note). Samples are of kernel mode only unless
/// --sample-user is given.
///
/// Samplers: `ibs` (AMD IBS op) and `pebs` (Intel PEBS load latency) are hardware samplers:
/// they report the data address, whether the access missed the L1 data cache, where the data
/// came from and its latency, so reports rank types by misses. Their --period is a count:
/// IBS ops (cycles on CPUs without IbsOpCntCtl), a multiple of 16 from 16 (above 1048560
/// needs IbsOpCntExt); PEBS loads, at least 1000. `software` samples a cpu-clock timer, and
/// its --period is a time. `auto` picks IBS, then PEBS, then software, by what the CPU, the
/// kernel (/sys/bus/event_source/devices) and the module offer, and says on stderr which and
/// why; a --period that is a time picks software. Asking for a sampler this machine does not
/// have is an error that says what is missing.
///
/// Records stream into PATH.partial, which is renamed to PATH only once complete; on an
/// error it is removed. Progress shows on a terminal; at the end one line on stderr gives
/// the records written, the records lost and the file. Lost records (the per-CPU rings filled
/// up) are reported loudly: use a larger --ring-size.
///
/// Exit status: CMD's exit status when a command was run (128+N if a signal N killed it),
/// else 0; 1 when collection failed; 2 for a usage error.
///
/// Examples:
///   dprof collect -o net.dprof -- iperf3 -c 127.0.0.1 -t 5
///   dprof collect -o idle.dprof --duration 10s --ring-size 16M
///   dprof collect -o slab.dprof --events slab --duration 5s
///   dprof collect -o hot.dprof --events samples --period 100us -- make -j4
///   dprof collect -o misses.dprof --sampler ibs --period 65536 --duration 5s
///   dprof collect -o flow.dprof --histories skbuff_head_cache:0+8:8+8 -- ping -c 100 ::1
///   dprof collect -o auto.dprof --histories auto --duration 20s
///   dprof collect -o full.dprof --histories full:skbuff_head_cache -- ping -c 100 ::1
///
/// Object access histories (--histories): the debug registers watch chosen byte ranges of one
/// object at a time, from its allocation to its free, and every access is recorded (the
/// instruction, CPU and time). Give types as CACHE[@FUNCTION][:OFFSET+LEN...]: the cache's
/// name, optionally only objects allocated in FUNCTION (a kmalloc-N@FUNCTION type), and one
/// to four ranges, one per debug register; several order their fields (LEN 1, 2, 4 or 8,
/// OFFSET a multiple of LEN). A type without ranges, or `auto`, first samples for --plan-time
/// and lets dprof pick the types with most samples and the offsets their samples use.
/// full:CACHE[@FUNCTION] watches every offset: each target watches four of the object's
/// 8-byte chunks, so that every pair of chunks is watched together by one target; one history
/// of each target makes a history set, and `dprof report --view data-flow` merges each set
/// into one ordered path (objects up to 1456 bytes). Histories need the slab events. At the
/// end, the code of the functions that touched the objects is copied from /proc/kcore into
/// the profile, so that `dprof report --view data-flow` can decode it.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct CollectArgs {
    /// Write the profile to PATH (as PATH.partial until it is complete).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// Collect for this long (e.g. 10s, 500ms, 2m) instead of running a command.
    #[arg(short, long, value_name = "TIME", value_parser = units::parse_duration)]
    duration: Option<Duration>,
    /// Bytes of each per-CPU ring: a power of two from 64K to 256M.
    #[arg(long, value_name = "SIZE", default_value = "4M", value_parser = dprof_collect::options::parse_ring_size)]
    ring_size: u32,
    /// What to record, comma-separated [default: slab,samples when the module has a sampler,
    /// else slab].
    #[arg(long, value_name = "EVENTS", value_enum, value_delimiter = ',')]
    events: Option<Vec<Event>>,
    /// Software sampler: time between samples on each CPU (e.g. 1ms, 250us), from 10us to 1s.
    /// IBS, PEBS: events between samples, a plain number (e.g. 65536) [default: 1ms for
    /// software, 262144 ops for IBS, 100003 loads for PEBS].
    #[arg(long, value_name = "PERIOD", value_parser = parse_period)]
    period: Option<Period>,
    /// Sample user-mode instructions too (kernel mode is always sampled).
    #[arg(long)]
    sample_user: bool,
    /// Which sampler takes access samples: auto picks IBS, then PEBS, then software, by what
    /// this machine and the module offer.
    #[arg(long, value_name = "SAMPLER", value_enum, default_value = "auto")]
    sampler: SamplerChoice,
    /// Object access histories: `auto`, or types as CACHE[@FUNCTION][:OFFSET+LEN...] (up to
    /// four ranges) or full:CACHE[@FUNCTION], comma-separated (see above).
    #[arg(long, value_name = "TYPES", value_parser = histories::parse_history_spec)]
    histories: Option<histories::HistorySpec>,
    /// Histories started per second at most (each costs an IPI to every CPU at its start and
    /// end, and a trap per watched access).
    #[arg(long, value_name = "N", default_value = "100",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(dprof_abi::MAX_HISTORIES_PER_SEC)))]
    history_rate: u32,
    /// A history still running after this long ends there (objects freed without a
    /// tracepoint, or long-lived ones).
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = parse_history_timeout)]
    history_timeout: u32,
    /// Accesses recorded per history at most; later ones are counted, not recorded.
    #[arg(long, value_name = "N", default_value = "4096",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(dprof_abi::MAX_HISTORY_HITS)))]
    history_max_hits: u32,
    /// With --histories auto or types without ranges: how long to sample before choosing.
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = units::parse_duration)]
    plan_time: Duration,
    /// Where to read kernel code from at the end (for the history analysis).
    #[arg(long, value_name = "PATH", default_value = "/proc/kcore", hide = true)]
    kcore: PathBuf,
    /// The dprof device.
    #[arg(long, value_name = "PATH", default_value = dprof_abi::DEVICE_PATH)]
    device: PathBuf,
    /// Which collector records: `module` (dprof.ko, everything), `perf` (perf events and
    /// kmem tracepoints on a stock kernel, no module; no --histories), or `auto`: the module
    /// when --device exists, else perf.
    #[arg(long, value_name = "BACKEND", value_enum, default_value = "auto")]
    backend: Backend,
    /// Perf backend: do not trace the page allocator. By default its allocations are
    /// recorded with their kernel call chains, so pages taken during the run are typed by
    /// the function that took them (`page@skb_page_frag_refill`); on workloads that churn
    /// through the page cache that can double the cost of collecting. Without it, pages are
    /// typed by their use only (`page cache page`, `kernel page`).
    #[arg(long)]
    no_page_events: bool,
    /// The command to profile, after `--`; collection stops when it exits.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Events the module can record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(super) enum Event {
    /// Slab allocations and frees, and the names and sizes of slab caches.
    Slab,
    /// Access samples: the interrupted instruction, its registers and bytes, every --period.
    Samples,
}

/// The collector a person can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Backend {
    /// dprof.ko when its device exists, else perf events.
    Auto,
    /// dprof.ko, through its device.
    Module,
    /// perf events and kmem tracepoints, with no module.
    Perf,
}

impl From<Backend> for options::BackendChoice {
    fn from(choice: Backend) -> Self {
        match choice {
            Backend::Auto => Self::Auto,
            Backend::Module => Self::Module,
            Backend::Perf => Self::Perf,
        }
    }
}

/// The sampler a person can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum SamplerChoice {
    /// IBS, else PEBS, else software: the best this machine and the module offer.
    Auto,
    /// The cpu-clock timer: registers and instruction bytes, no hardware miss data.
    Software,
    /// AMD IBS op: data address, L1 miss, data source, miss latency.
    Ibs,
    /// Intel PEBS load latency: data address, data source, latency of loads.
    Pebs,
}

/// Parses --history-timeout into ms within what the module accepts.
fn parse_history_timeout(s: &str) -> Result<u32, String> {
    let d = units::parse_duration(s)?;
    let ms = u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
    if !(1..=dprof_abi::MAX_HISTORY_TIMEOUT_MS).contains(&ms) {
        return Err(format!(
            "{s:?} is outside 1ms..={}s",
            dprof_abi::MAX_HISTORY_TIMEOUT_MS / 1000
        ));
    }
    Ok(ms)
}

impl From<Event> for options::Event {
    fn from(event: Event) -> Self {
        match event {
            Event::Slab => Self::Slab,
            Event::Samples => Self::Samples,
        }
    }
}

impl From<SamplerChoice> for options::SamplerChoice {
    fn from(choice: SamplerChoice) -> Self {
        match choice {
            SamplerChoice::Auto => Self::Auto,
            SamplerChoice::Software => Self::Software,
            SamplerChoice::Ibs => Self::Ibs,
            SamplerChoice::Pebs => Self::Pebs,
        }
    }
}

impl CollectArgs {
    /// What the collector is asked to do.
    fn options(&self) -> CollectOptions {
        CollectOptions {
            output: self.output.clone(),
            duration: self.duration,
            ring_size: self.ring_size,
            events: self
                .events
                .as_ref()
                .map(|events| events.iter().copied().map(options::Event::from).collect()),
            period: self.period.clone(),
            sample_user: self.sample_user,
            sampler: self.sampler.into(),
            histories: self.histories.clone(),
            history_rate: self.history_rate,
            history_timeout_ms: self.history_timeout,
            history_max_hits: self.history_max_hits,
            plan_time: self.plan_time,
            kcore: self.kcore.clone(),
            device: self.device.clone(),
            backend: self.backend.into(),
            page_events: !self.no_page_events,
            command: self.command.clone(),
        }
    }
}

/// A usage error found after the arguments were parsed: `main` reports it as clap reports
/// its own (exit status 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A collector's error for `main`: usage errors as [`UsageError`], the rest with their
/// causes.
pub(super) fn cli_error(e: CollectError) -> anyhow::Error {
    match e {
        CollectError::Usage(message) => UsageError(message).into(),
        e => e.into(),
    }
}

/// The terminal: a progress line on stderr when it is a terminal, and the collector's lines
/// above it.
pub(super) struct Terminal {
    bar: ProgressBar,
}

impl Terminal {
    pub(super) fn new() -> Self {
        Self {
            bar: progress_bar(),
        }
    }
}

impl Observer for Terminal {
    fn progress(&mut self, progress: &Progress<'_>) {
        let message = match *progress {
            Progress::Collecting {
                records,
                bytes,
                lost,
                elapsed,
            } => {
                #[expect(clippy::cast_precision_loss, reason = "display only")]
                let rate = records as f64 / elapsed.as_secs_f64().max(1e-3);
                format!(
                    "{records} records ({rate:.0}/s), {lost} lost, {}",
                    format_bytes(bytes)
                )
            }
            Progress::Profiling => {
                "profiling phase: finding the types and their instructions".to_owned()
            }
            Progress::Experiment {
                done,
                type_name,
                speedup_percent,
                length,
                fewest_visits,
            } => format!(
                "experiment {done}: {type_name} +{speedup_percent}% for {}, {fewest_visits} \
                 visits",
                format_ns(u64::try_from(length.as_nanos()).unwrap_or(u64::MAX))
            ),
            _ => return,
        };
        self.bar.set_message(message);
    }

    fn say(&mut self, line: &str) {
        self.bar.suspend(|| eprintln!("dprof: {line}"));
    }

    fn warn(&mut self, message: &str) {
        self.bar.suspend(|| eprintln!("dprof: warning: {message}"));
    }

    fn finished(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// dprof's exit code once collection is over: the command's (waited for if dprof was
/// interrupted first), or success without a command.
pub(super) fn exit_code_of(
    workload: Option<Workload>,
    signals: &Signals,
    observer: &mut dyn Observer,
) -> anyhow::Result<ExitCode> {
    let Some(w) = workload else {
        return Ok(ExitCode::SUCCESS);
    };
    let status = w.exit_status(signals.which(), observer)?;
    Ok(exit_code(status))
}

fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

/// SIGINT and SIGTERM: the first sets a flag the collector polls, a second exits at once.
pub(super) struct Signals {
    which: Arc<AtomicUsize>,
}

impl Signals {
    pub(super) fn register() -> anyhow::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use signal_hook::flag;
        let seen = Arc::new(AtomicBool::new(false));
        let which = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM] {
            // Order matters: the shutdown check runs before the flag is set, so it fires
            // only on the second signal.
            flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&seen))
                .and_then(|_| flag::register(sig, Arc::clone(&seen)))
                .and_then(|_| flag::register_usize(sig, Arc::clone(&which), sig as usize))
                .context("cannot install signal handlers")?;
        }
        Ok(Self { which })
    }

    /// The signal that asked dprof to stop, once one did.
    pub(super) fn which(&self) -> Option<i32> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }
}

pub fn run(args: &CollectArgs) -> anyhow::Result<ExitCode> {
    let options = args.options();
    let checked = record::check(&options).map_err(cli_error)?;
    let mut terminal = Terminal::new();
    let collection = checked.open(&mut terminal).map_err(cli_error)?;
    // Before the file exists, so that from here on a signal finishes or removes it.
    let signals = Signals::register()?;
    let recorded = collection
        .record(&|| signals.which(), &mut terminal)
        .map_err(cli_error)?;
    report(&recorded, args.ring_size);
    exit_code_of(recorded.workload, &signals, &mut terminal)
}

/// The one-line summary, and a loud warning when records were lost.
fn report(recorded: &Recorded, ring_bytes: u32) {
    // The whole file, header included: what the person will copy around, next to the
    // records' share (the header holds kallsyms, BTF and module lists, often megabytes).
    let file_bytes = std::fs::metadata(&recorded.path).ok().map(|m| m.len());
    for line in report_lines(recorded, ring_bytes, file_bytes) {
        eprintln!("{line}");
    }
}

fn report_lines(recorded: &Recorded, ring_bytes: u32, file_bytes: Option<u64>) -> Vec<String> {
    let Recorded {
        path,
        records,
        bytes,
        stop,
        cpu_ns,
        ..
    } = recorded;
    let lost = stop.device.as_ref().map(|d| d.records_lost);
    let lost_text = lost.map_or_else(|| "? lost".to_owned(), |n| format!("{n} lost"));
    // What the collector cost per record: the figure that says whether it keeps up.
    let cpu_text = match cpu_ns {
        Some(ns) if *records > 0 => format!(
            "; collector CPU {} ({:.2} µs per record)",
            format_ns(*ns),
            *ns as f64 / 1000.0 / *records as f64
        ),
        _ => String::new(),
    };
    let file_text = file_bytes.map_or_else(String::new, |n| {
        format!(": {} with the kernel's symbols and types", format_bytes(n))
    });
    let mut lines = vec![format!(
        "dprof: {records} records ({}), {lost_text}; {}{file_text} ({}, {}){cpu_text}",
        format_bytes(*bytes),
        path.display(),
        stop.reason,
        format_ns(stop.elapsed_ns)
    )];
    if let Some(device) = stop.device.as_ref().filter(|d| d.records_lost > 0) {
        let per_cpu: Vec<String> = device
            .cpus
            .iter()
            .enumerate()
            .filter(|(_, c)| c.records_lost > 0)
            .map(|(cpu, c)| format!("cpu{cpu}={}", c.records_lost))
            .collect();
        let now = u64::from(ring_bytes);
        let larger = now
            .saturating_mul(4)
            .min(u64::from(dprof_abi::MAX_RING_BYTES));
        let advice = if larger > now {
            // "16 MiB" -> "16M", as --ring-size takes it.
            let arg = format_bytes(larger).replace(' ', "").replace("iB", "");
            format!(
                "collect again with a larger --ring-size (now {} per CPU; try --ring-size {arg})",
                format_bytes(now)
            )
        } else {
            "the rings are already as large as they go: collect fewer events or for a shorter \
             time"
                .to_owned()
        };
        lines.push(format!(
            "dprof: WARNING: {} RECORDS WERE LOST ({}): the per-CPU rings filled faster than \
             dprof read them, so this profile is missing events; {advice}",
            device.records_lost,
            per_cpu.join(" "),
        ));
    }
    lines
}

#[cfg(test)]
mod tests;
