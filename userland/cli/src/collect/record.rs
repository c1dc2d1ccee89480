//! `dprof collect`: drive `/dev/dprof` and stream its records into a profile file.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use dprof_abi::{Config, VersionInfo};
use dprof_analysis::symbols::Kallsyms;
use dprof_collect::backend::Backend;
use dprof_collect::device::{Device, ReadOutcome};
use dprof_collect::histories;
use dprof_collect::samplers::{self, HardwareSamplers};
use dprof_collect::system;
use dprof_format::{
    CollectConfig, DeviceCounters, HistoryCollectConfig, KernelText, PeriodEvents, PmuEvent,
    ProfileWriter, SamplingConfig, StopInfo, StopReason, Target,
};
use indicatif::{ProgressBar, ProgressStyle};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

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
///
/// Object access histories (--histories): the debug registers watch chosen byte ranges of one
/// object at a time, from its allocation to its free, and every access is recorded (the
/// instruction, CPU and time). Give types as CACHE[@FUNCTION][:OFFSET+LEN[:OFFSET+LEN]]:
/// the cache's name, optionally only objects allocated in FUNCTION (a kmalloc-N@FUNCTION
/// type), and one range, or two to order two fields (LEN 1, 2, 4 or 8, OFFSET a multiple of
/// LEN). A type without ranges, or `auto`, first samples for --plan-time and lets dprof pick
/// the types with most samples and the offsets their samples use. Histories need the slab
/// events. At the end, the code of the functions that touched the objects is copied from
/// /proc/kcore into the profile, so that `dprof report --view data-flow` can decode it.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct CollectArgs {
    /// Write the profile to PATH (as PATH.partial until it is complete).
    #[arg(short, long, value_name = "PATH")]
    pub(super) output: PathBuf,
    /// Collect for this long (e.g. 10s, 500ms, 2m) instead of running a command.
    #[arg(short, long, value_name = "TIME", value_parser = units::parse_duration)]
    pub(super) duration: Option<Duration>,
    /// Bytes of each per-CPU ring: a power of two from 64K to 256M.
    #[arg(long, value_name = "SIZE", default_value = "4M", value_parser = units::parse_ring_size)]
    pub(super) ring_size: u32,
    /// What to record, comma-separated [default: slab,samples when the module has a sampler,
    /// else slab].
    #[arg(long, value_name = "EVENTS", value_enum, value_delimiter = ',')]
    pub(super) events: Option<Vec<Event>>,
    /// Software sampler: time between samples on each CPU (e.g. 1ms, 250us), from 10us to 1s.
    /// IBS, PEBS: events between samples, a plain number (e.g. 65536) [default: 1ms for
    /// software, 262144 ops for IBS, 100003 loads for PEBS].
    #[arg(long, value_name = "PERIOD", value_parser = parse_period)]
    pub(super) period: Option<PeriodArg>,
    /// Sample user-mode instructions too (kernel mode is always sampled).
    #[arg(long)]
    pub(super) sample_user: bool,
    /// Which sampler takes access samples: auto picks IBS, then PEBS, then software, by what
    /// this machine and the module offer.
    #[arg(long, value_name = "SAMPLER", value_enum, default_value = "auto")]
    pub(super) sampler: SamplerChoice,
    /// Object access histories: `auto`, or types as CACHE[@FUNCTION][:OFFSET+LEN[:OFFSET+LEN]],
    /// comma-separated (see above).
    #[arg(long, value_name = "TYPES", value_parser = histories::parse_history_spec)]
    pub(super) histories: Option<histories::HistorySpec>,
    /// Histories started per second at most (each costs an IPI to every CPU at its start and
    /// end, and a trap per watched access).
    #[arg(long, value_name = "N", default_value = "100",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(dprof_abi::MAX_HISTORIES_PER_SEC)))]
    pub(super) history_rate: u32,
    /// A history still running after this long ends there (objects freed without a
    /// tracepoint, or long-lived ones).
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = parse_history_timeout)]
    pub(super) history_timeout: u32,
    /// Accesses recorded per history at most; later ones are counted, not recorded.
    #[arg(long, value_name = "N", default_value = "4096",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(dprof_abi::MAX_HISTORY_HITS)))]
    pub(super) history_max_hits: u32,
    /// With --histories auto or types without ranges: how long to sample before choosing.
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = units::parse_duration)]
    pub(super) plan_time: Duration,
    /// Where to read kernel code from at the end (for the history analysis).
    #[arg(long, value_name = "PATH", default_value = "/proc/kcore", hide = true)]
    pub(super) kcore: PathBuf,
    /// The dprof device.
    #[arg(long, value_name = "PATH", default_value = dprof_abi::DEVICE_PATH)]
    pub(super) device: PathBuf,
    /// The command to profile, after `--`; collection stops when it exits.
    #[arg(last = true, value_name = "CMD")]
    pub(super) command: Vec<OsString>,
}

/// Events the module can record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(super) enum Event {
    /// Slab allocations and frees, and the names and sizes of slab caches.
    Slab,
    /// Access samples: the interrupted instruction, its registers and bytes, every --period.
    Samples,
}

impl Event {
    const fn bit(self) -> u32 {
        match self {
            Self::Slab => dprof_abi::EVENT_SLAB,
            Self::Samples => dprof_abi::EVENT_SAMPLES,
        }
    }

    pub(super) const fn name(self) -> &'static str {
        match self {
            Self::Slab => "slab",
            Self::Samples => "samples",
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

/// The software sampler's default period (ns).
const DEFAULT_PERIOD: u32 = dprof_abi::DEFAULT_SAMPLE_PERIOD_NS;

/// IBS's default period: 0x40000 ops. A core retiring ~3e9 ops/s takes at most ~11k samples/s
/// (about 4k of them loads and stores), about the records and NMI time PEBS's default costs;
/// and it is below 0xFFFF0, so CPUs without `IbsOpCntExt` take it too.
const DEFAULT_IBS_PERIOD: u32 = 0x40000;

/// PEBS's default period: 100003 loads. A core running kernel code loads up to ~1e9 times a
/// second, so at most ~10k samples/s per CPU: ~2 MB/s of records and a few % of NMI time. A
/// prime, so that the samples do not fall in step with a loop.
const DEFAULT_PEBS_PERIOD: u32 = 100_003;

/// --period as given: a time (software) or a count of events (IBS, PEBS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PeriodArg {
    /// A duration within what the module accepts, in ns, and how it was written.
    Time { ns: u32, text: String },
    /// A plain number.
    Count(u64),
}

/// Parses --period: a plain number is a count of events (checked against the sampler once it
/// is known); anything else is a time.
pub(super) fn parse_period(s: &str) -> Result<PeriodArg, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map(PeriodArg::Count)
            .map_err(|_| format!("{s:?} is too large"));
    }
    parse_period_time(s).map(|ns| PeriodArg::Time {
        ns,
        text: t.to_owned(),
    })
}

/// Parses a software period: a duration within what the module accepts, in ns.
fn parse_period_time(s: &str) -> Result<u32, String> {
    let d = units::parse_duration(s)?;
    let (min, max) = (
        dprof_abi::MIN_SAMPLE_PERIOD_NS,
        dprof_abi::MAX_SAMPLE_PERIOD_NS,
    );
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if ns < u64::from(min) {
        return Err(format!(
            "{s:?} is shorter than {}: below it the sampler's own cost would dominate",
            format_ns(u64::from(min))
        ));
    }
    if ns > u64::from(max) {
        return Err(format!(
            "{s:?} is longer than {}",
            format_ns(u64::from(max))
        ));
    }
    u32::try_from(ns).map_err(|_| format!("{s:?} is out of range"))
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

/// A sampler, settled: what `IOC_CONFIGURE` and the profile header get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sampling {
    /// `SAMPLER_KIND_*`.
    kind: u8,
    /// `software`, `ibs` or `pebs`.
    name: &'static str,
    /// Software: ns; IBS: ops or cycles; PEBS: loads.
    period: u32,
    /// What `period` counts: `ns`, `ops`, `cycles` or `loads`.
    unit: &'static str,
    /// Sample user mode too.
    user: bool,
    /// Hardware: the PMU's sysfs name, its type and the event's `config`, `config1`.
    pmu: String,
    pmu_type: u32,
    pmu_config: u64,
    pmu_config1: u64,
}

impl Sampling {
    fn software(period: u32, user: bool) -> Self {
        Self {
            kind: dprof_abi::SAMPLER_KIND_SOFTWARE,
            name: "software",
            period,
            unit: "ns",
            user,
            pmu: String::new(),
            pmu_type: 0,
            pmu_config: 0,
            pmu_config1: 0,
        }
    }

    fn is_hardware(&self) -> bool {
        self.kind != dprof_abi::SAMPLER_KIND_SOFTWARE
    }

    /// What the profile header records: a time for the software sampler; a count of events
    /// and the perf event for hardware samplers (their `period_ns` is 0).
    pub(super) fn header_config(&self) -> SamplingConfig {
        let hardware = self.is_hardware();
        SamplingConfig {
            sampler: self.name.to_owned(),
            period_ns: if hardware { 0 } else { self.period },
            user: self.user,
            period_events: hardware.then(|| PeriodEvents {
                count: u64::from(self.period),
                unit: self.unit.to_owned(),
            }),
            pmu: hardware.then(|| PmuEvent {
                pmu: self.pmu.clone(),
                pmu_type: self.pmu_type,
                config: self.pmu_config,
                config1: self.pmu_config1,
            }),
        }
    }
}

/// What will be collected, settled against what the machine and the module offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) events: Vec<Event>,
    /// With samples: the sampler.
    pub(super) sampling: Option<Sampling>,
    /// A one-line note for the person (why samples are off by default).
    note: Option<String>,
    /// With `--sampler auto`: which sampler was picked and why, one line.
    pick: Option<String>,
}

/// Decides events and sampler from the arguments, the hardware samplers this machine offers,
/// and the module's `samplers` bits (`None` before the module was asked: every sampler is
/// then assumed, so that what the machine lacks is found before the device is opened).
pub(super) fn plan(
    args: &CollectArgs,
    module_samplers: Option<u32>,
    hw: &HardwareSamplers,
) -> anyhow::Result<Plan> {
    let any_sampler =
        dprof_abi::SAMPLER_SOFTWARE | dprof_abi::SAMPLER_IBS | dprof_abi::SAMPLER_PEBS;
    let mut note = None;
    let mut events = match &args.events {
        Some(events) => events.clone(),
        None if module_samplers.is_none_or(|m| m & any_sampler != 0) => {
            vec![Event::Slab, Event::Samples]
        }
        None => {
            note = Some(
                "the module offers no sampler, so only slab events are collected (no access \
                 samples)"
                    .to_owned(),
            );
            vec![Event::Slab]
        }
    };
    events.sort();
    events.dedup();
    if !events.contains(&Event::Samples) {
        return Ok(Plan {
            events,
            sampling: None,
            note,
            pick: None,
        });
    }
    let chooser = Chooser {
        period: args.period.as_ref(),
        user: args.sample_user,
        module: module_samplers,
        hw,
    };
    let (sampling, pick) = match args.sampler {
        SamplerChoice::Software => (chooser.software()?, None),
        SamplerChoice::Ibs => (chooser.ibs()?, None),
        SamplerChoice::Pebs => (chooser.pebs()?, None),
        SamplerChoice::Auto => {
            let (sampling, why) = chooser.auto()?;
            (sampling, Some(why))
        }
    };
    Ok(Plan {
        events,
        sampling: Some(sampling),
        note,
        pick,
    })
}

/// Picks and checks a sampler (see [`plan`]).
struct Chooser<'a> {
    period: Option<&'a PeriodArg>,
    user: bool,
    module: Option<u32>,
    hw: &'a HardwareSamplers,
}

impl Chooser<'_> {
    /// Whether the module offers `SAMPLER_*` bit `bit` (assumed before it was asked).
    fn offers(&self, bit: u32) -> bool {
        self.module.is_none_or(|m| m & bit != 0)
    }

    fn module_bits(&self) -> u32 {
        self.module.unwrap_or(0)
    }

    fn software(&self) -> anyhow::Result<Sampling> {
        if !self.offers(dprof_abi::SAMPLER_SOFTWARE) {
            bail!(
                "the module offers no software sampler (samplers {:#x}): rebuild dprof.ko with \
                 it, or collect --events slab",
                self.module_bits()
            );
        }
        let ns = match self.period {
            None => DEFAULT_PERIOD,
            Some(PeriodArg::Time { ns, .. }) => *ns,
            Some(PeriodArg::Count(n)) => bail!(
                "--period {n} is a count of events, but the software sampler takes the time \
                 between samples, e.g. --period 1ms"
            ),
        };
        Ok(Sampling::software(ns, self.user))
    }

    fn ibs(&self) -> anyhow::Result<Sampling> {
        let caps = match &self.hw.ibs {
            Ok(caps) => caps,
            Err(why) => bail!("cannot sample with IBS: {why}; use --sampler software"),
        };
        if !self.offers(dprof_abi::SAMPLER_IBS) {
            bail!(
                "the module offers no IBS sampler (samplers {:#x}): load a dprof.ko built with \
                 it, or use --sampler software",
                self.module_bits()
            );
        }
        let unit = caps.unit();
        let period = match self.period {
            None => DEFAULT_IBS_PERIOD,
            Some(PeriodArg::Time { text, .. }) => bail!(
                "--period {text} is a time, but IBS counts {unit}: give a number, e.g. \
                 --period {DEFAULT_IBS_PERIOD}"
            ),
            Some(PeriodArg::Count(n)) => ibs_period(*n)?,
        };
        Ok(Sampling {
            kind: dprof_abi::SAMPLER_KIND_IBS,
            name: "ibs",
            period,
            unit,
            user: self.user,
            pmu: "ibs_op".to_owned(),
            pmu_type: caps.pmu_type,
            pmu_config: caps.config,
            pmu_config1: 0,
        })
    }

    fn pebs(&self) -> anyhow::Result<Sampling> {
        let caps = match &self.hw.pebs {
            Ok(caps) => caps,
            Err(why) => bail!("cannot sample with PEBS: {why}; use --sampler software"),
        };
        if !self.offers(dprof_abi::SAMPLER_PEBS) {
            bail!(
                "the module offers no PEBS sampler (samplers {:#x}): load a dprof.ko built \
                 with it, or use --sampler software",
                self.module_bits()
            );
        }
        let period = match self.period {
            None => DEFAULT_PEBS_PERIOD,
            Some(PeriodArg::Time { text, .. }) => bail!(
                "--period {text} is a time, but PEBS counts loads: give a number, e.g. \
                 --period {DEFAULT_PEBS_PERIOD}"
            ),
            Some(PeriodArg::Count(n)) => pebs_period(*n)?,
        };
        Ok(Sampling {
            kind: dprof_abi::SAMPLER_KIND_PEBS,
            name: "pebs",
            period,
            unit: "loads",
            user: self.user,
            pmu: caps.pmu.clone(),
            pmu_type: caps.pmu_type,
            pmu_config: caps.config,
            pmu_config1: caps.config1,
        })
    }

    /// IBS, else PEBS, else software; the line says which and why the ones before it were
    /// passed over.
    fn auto(&self) -> anyhow::Result<(Sampling, String)> {
        let mut passed: Vec<String> = Vec::new();
        let time = match self.period {
            Some(PeriodArg::Time { text, .. }) => Some(text.as_str()),
            _ => None,
        };
        let hardware = [
            ("IBS", dprof_abi::SAMPLER_IBS, self.hw.ibs.as_ref().err()),
            ("PEBS", dprof_abi::SAMPLER_PEBS, self.hw.pebs.as_ref().err()),
        ];
        for (name, bit, missing) in hardware {
            if let Some(why) = missing {
                passed.push(format!("no {name}: {why}"));
            } else if !self.offers(bit) {
                passed.push(format!("no {name}: the module offers no {name} sampler"));
            } else if let Some(text) = time {
                passed.push(format!(
                    "not {name}: --period {text} is a time, and {name} counts events"
                ));
            } else {
                let sampling = if bit == dprof_abi::SAMPLER_IBS {
                    self.ibs()?
                } else {
                    self.pebs()?
                };
                let mut why = vec![self.describe(&sampling)];
                why.extend(passed);
                let line = format!("{} ({})", sampling.name, why.join("; "));
                return Ok((sampling, line));
            }
        }
        if let Some(PeriodArg::Count(n)) = self.period {
            bail!(
                "--period {n} is a count of events, for IBS or PEBS, and neither can be used \
                 ({}): give the software sampler a time, e.g. --period 1ms",
                passed.join("; ")
            );
        }
        if !self.offers(dprof_abi::SAMPLER_SOFTWARE) {
            bail!(
                "the module offers no sampler this machine can use (samplers {:#x}; {}): \
                 collect without samples, e.g. --events slab",
                self.module_bits(),
                passed.join("; ")
            );
        }
        let sampling = self.software()?;
        Ok((sampling, format!("software ({})", passed.join("; "))))
    }

    /// The hardware sampler in a few words, for the pick line.
    fn describe(&self, s: &Sampling) -> String {
        match (&self.hw.ibs, &self.hw.pebs) {
            (Ok(ibs), _) if s.kind == dprof_abi::SAMPLER_KIND_IBS => format!(
                "AMD IBS op, ibs_op PMU type {}, every {} {}",
                ibs.pmu_type, s.period, s.unit
            ),
            (_, Ok(pebs)) => format!(
                "Intel PEBS load latency, {} PMU{} type {}, mem-loads {}, every {} {}",
                pebs.pmu,
                pebs.pmu_name
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" ({n})")),
                pebs.pmu_type,
                pebs.event,
                s.period,
                s.unit
            ),
            _ => format!("every {} {}", s.period, s.unit),
        }
    }
}

/// Checks an IBS period: a multiple of 16 within what the ABI accepts (the hardware counts
/// in units of 16).
fn ibs_period(n: u64) -> anyhow::Result<u32> {
    let (min, max) = (
        u64::from(dprof_abi::MIN_IBS_PERIOD),
        u64::from(dprof_abi::MAX_IBS_PERIOD),
    );
    if n < min {
        bail!("--period {n} is below IBS's smallest period, {min}");
    }
    if n > max {
        bail!("--period {n} is above IBS's largest period, {max} ({max:#x})");
    }
    if !n.is_multiple_of(16) {
        let below = n / 16 * 16;
        bail!(
            "--period {n} is not a multiple of 16, which IBS needs (it counts in units of 16): \
             use {below} or {}",
            below + 16
        );
    }
    u32::try_from(n).map_err(|_| anyhow::anyhow!("--period {n} is out of range"))
}

/// Checks a PEBS period: at least what the ABI accepts.
fn pebs_period(n: u64) -> anyhow::Result<u32> {
    let min = dprof_abi::MIN_PEBS_PERIOD;
    if n < u64::from(min) {
        bail!(
            "--period {n} is below PEBS's smallest period, {min} loads: shorter ones flood the \
             rings with PEBS records"
        );
    }
    u32::try_from(n)
        .map_err(|_| anyhow::anyhow!("--period {n} is above the largest period, {}", u32::MAX))
}

/// Bytes gathered from the device before they go to the file as one Records section.
pub(super) const READ_BUFFER: usize = 1 << 20;
/// Room left in the buffer below which it is written out before the next read.
const MIN_READ_ROOM: usize = 64 << 10;
/// Longest time gathered records wait in memory while the rings are idle.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Sleep when the rings are empty.
pub(super) const IDLE_SLEEP: Duration = Duration::from_millis(5);
/// How often the progress line asks the module for its counters.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// How long to keep reading after stop while the module answers EAGAIN instead of 0.
const DRAIN_PATIENCE: Duration = Duration::from_secs(2);

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

pub(super) fn usage_error(message: &str) -> anyhow::Error {
    UsageError(message.to_owned()).into()
}

pub(super) fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(super) fn warn(progress: &ProgressBar, message: &str) {
    progress.suspend(|| eprintln!("dprof: warning: {message}"));
}

/// What ends the collection, from the command line (a usage error unless exactly one of a
/// command and --duration is given).
pub(super) fn target_of(args: &CollectArgs) -> anyhow::Result<Target> {
    match (args.duration, args.command.is_empty()) {
        (Some(_), false) => Err(usage_error(
            "give either a command after `--` or --duration, not both: collection stops when \
             the command exits",
        )),
        (None, true) => Err(usage_error(
            "nothing would end the collection: give --duration (e.g. --duration 10s) or a \
             command after `--`",
        )),
        (Some(d), true) => Ok(Target::Duration {
            ns: u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        }),
        (None, false) => Ok(Target::Command {
            argv: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }),
    }
}

pub fn run(args: &CollectArgs) -> anyhow::Result<ExitCode> {
    let target = target_of(args)?;
    check_event_args(args)?;
    // What this machine lacks is said before the device is opened: it does not depend on the
    // module, and needs no root.
    let hw = samplers::detect(Path::new("/"));
    plan(args, None, &hw)?;
    let progress = progress_bar();
    let root = Path::new("/");
    let kallsyms = system::kallsyms(root)?;
    let symbols = Kallsyms::parse(&kallsyms);
    let (mut dev, version, plan, config) = open_and_configure(args, &hw, &symbols, &progress)?;

    let collect_config = CollectConfig {
        events: plan.events.iter().map(|e| e.name().to_owned()).collect(),
        ring_bytes: args.ring_size,
        target,
        sampling: plan.sampling.as_ref().map(Sampling::header_config),
        histories: history_header(args),
        causal: None,
    };
    let header = system::gather_header(root, collect_config, version.into(), now_unix_s())
        .context("cannot describe this system in the profile header")?;
    if header.slab_merging {
        warn(
            &progress,
            "slab merging is on (no slab_nomerge on the kernel command line): caches of \
             similar geometry share one name, so some types will be lost; boot with \
             slab_nomerge to keep them apart",
        );
    }
    let modules = system::modules(root)?;
    // Before the file exists, so that from here on a signal finishes or removes it.
    let signals = Signals::register()?;
    let mut writer = ProfileWriter::create(&args.output, &header, &kallsyms, &modules)?;
    let mut workload = None;
    let options = dprof_analysis::pipeline::Options::default();
    let mut tap = Tap::new(args, &header, &symbols, &options, config);
    let result = collect_loop(
        &mut dev,
        &mut writer,
        Loop {
            args,
            version: &version,
            signals: &signals,
            progress: &progress,
            symbols: &symbols,
        },
        &mut tap,
        &mut workload,
    );
    progress.finish_and_clear();
    let stop = match result {
        Ok(stop) => stop,
        Err(e) => {
            let _ = dev.stop();
            let partial = writer.partial().to_path_buf();
            let removed = writer.abandon().is_ok();
            if let Some(w) = workload.as_mut() {
                eprintln!("dprof: stopping the command (SIGTERM) because collection failed");
                w.terminate(libc::SIGTERM);
                let _ = w.child.wait();
            }
            let note = if removed {
                format!("{} was removed", partial.display())
            } else {
                format!("{} is incomplete", partial.display())
            };
            return Err(e.context(format!("collection failed ({note})")));
        }
    };
    let records = writer.record_count();
    let bytes = writer.record_bytes();
    let text = capture_text(&tap, &symbols, &args.kcore);
    let path = writer.finish_with_text(&stop, &text).with_context(|| {
        format!(
            "cannot finish the profile ({} is incomplete)",
            dprof_format::partial_path(&args.output).display()
        )
    })?;
    report(&path, records, bytes, &stop, args.ring_size);
    Workload::exit_code_of(workload, &signals)
}

/// The code history traps landed in, from kcore (empty without histories).
fn capture_text(tap: &Tap, symbols: &Kallsyms, kcore: &Path) -> KernelText {
    match &tap.traps {
        Some(traps) if !traps.is_empty() => {
            let (text, note) = histories::capture_text(traps, symbols, kcore);
            if let Some(note) = note {
                eprintln!("dprof: warning: {note}");
            }
            text
        }
        _ => KernelText::new(),
    }
}

/// What the profile header says about --histories.
fn history_header(args: &CollectArgs) -> Option<HistoryCollectConfig> {
    args.histories.as_ref().map(|spec| HistoryCollectConfig {
        spec: spec.to_string(),
        max_per_sec: args.history_rate,
        timeout_ms: args.history_timeout,
        max_hits: args.history_max_hits,
        plan_ns: spec
            .needs_planning()
            .then(|| u64::try_from(args.plan_time.as_nanos()).unwrap_or(u64::MAX)),
    })
}

/// Usage errors of the sampler and history options against --events.
fn check_event_args(args: &CollectArgs) -> anyhow::Result<()> {
    let sampling_asked =
        args.period.is_some() || args.sample_user || args.sampler != SamplerChoice::Auto;
    if sampling_asked
        && args
            .events
            .as_ref()
            .is_some_and(|e| !e.contains(&Event::Samples))
    {
        return Err(usage_error(
            "--period, --sample-user and --sampler need the samples event (--events \
             slab,samples)",
        ));
    }
    check_history_args(args)
}

/// Usage errors of --histories against --events.
fn check_history_args(args: &CollectArgs) -> anyhow::Result<()> {
    if let Some(spec) = &args.histories {
        let given = args.events.as_ref();
        if given.is_some_and(|e| !e.contains(&Event::Slab)) {
            return Err(usage_error(
                "--histories needs the slab events, which start and end histories",
            ));
        }
        if spec.needs_planning() && given.is_some_and(|e| !e.contains(&Event::Samples)) {
            return Err(usage_error(
                "--histories auto (or a type without ranges) chooses from access samples: \
                 collect the samples event too, or give each type its ranges",
            ));
        }
    }
    Ok(())
}

/// Opens the device, checks the module's version and configures it. Runs before anything
/// else: if the device is missing or busy, nothing else happens and no file appears.
pub(super) fn open_and_configure(
    args: &CollectArgs,
    hw: &HardwareSamplers,
    symbols: &Kallsyms,
    progress: &ProgressBar,
) -> anyhow::Result<(Device, VersionInfo, Plan, Config)> {
    let dev = Device::open_path(&args.device)?;
    let version = dev.checked_version()?;
    if !(version.min_ring_bytes..=version.max_ring_bytes).contains(&args.ring_size) {
        bail!(
            "--ring-size {} is outside what the module accepts ({}..={})",
            format_bytes(u64::from(args.ring_size)),
            format_bytes(u64::from(version.min_ring_bytes)),
            format_bytes(u64::from(version.max_ring_bytes))
        );
    }
    let plan = plan(args, Some(version.samplers), hw)?;
    if let Some(note) = &plan.note {
        progress.suspend(|| eprintln!("dprof: note: {note}"));
    }
    if let Some(pick) = &plan.pick {
        progress.suspend(|| eprintln!("dprof: sampler: {pick}"));
    }
    let events = &plan.events;
    if events.contains(&Event::Slab) && version.features & dprof_abi::FEATURE_SLAB_EVENTS == 0 {
        warn(
            progress,
            "the module did not find all kmem tracepoints: expect few or no slab records",
        );
    }
    let mut config = Config {
        struct_size: Config::SIZE as u32,
        events: events.iter().fold(0, |bits, e| bits | e.bit()),
        ring_bytes: args.ring_size,
        ..Config::default()
    };
    if let Some(s) = &plan.sampling {
        config.sampler = u32::from(s.kind);
        config.sample_period_ns = s.period;
        config.sample_user = u32::from(s.user);
        config.pmu_type = s.pmu_type;
        config.pmu_config = s.pmu_config;
        config.pmu_config1 = s.pmu_config1;
    }
    if let Some(spec) = &args.histories {
        if version.features & dprof_abi::FEATURE_HISTORIES == 0 {
            bail!(
                "the module cannot collect object access histories here (it needs the kmem \
                 tracepoints and the list of slab caches; see its messages in dmesg)"
            );
        }
        // Types with their ranges are planned now, so that a wrong one fails before the
        // file exists; the others after the sampling phase.
        if let histories::HistorySpec::Types(types) = spec {
            if !spec.needs_planning() {
                let history_plan = histories::module_plan(types, symbols, plan_limits(args))?;
                let mut with_histories = config;
                with_histories.events |= dprof_abi::EVENT_HISTORIES;
                dev.configure(&with_histories)?;
                dev.history_plan(&history_plan)?;
                return Ok((dev, version, plan, with_histories));
            }
        }
    }
    dev.configure(&config)?;
    Ok((dev, version, plan, config))
}

fn plan_limits(args: &CollectArgs) -> histories::PlanLimits {
    histories::PlanLimits {
        max_per_sec: args.history_rate,
        timeout_ms: args.history_timeout,
        max_hits: args.history_max_hits,
    }
}

/// What the collector looks at in the records it writes: the trap ips of histories (whose
/// code it copies at the end), and during a planning phase, the analysis that picks what the
/// histories watch.
struct Tap<'s> {
    traps: Option<histories::TrapIps>,
    planner: Option<Planner<'s>>,
}

/// A planning phase in progress.
struct Planner<'s> {
    spec: histories::HistorySpec,
    /// Fed with every record until the phase ends.
    analyzer: Option<dprof_analysis::pipeline::Analyzer<'s>>,
    /// The configuration to start the histories with.
    config: Config,
}

impl<'s> Tap<'s> {
    /// What `args` needs watched; `config` is what histories start with after planning.
    fn new(
        args: &CollectArgs,
        header: &dprof_format::ProfileHeader,
        symbols: &'s Kallsyms,
        options: &dprof_analysis::pipeline::Options,
        config: Config,
    ) -> Self {
        Self {
            traps: args
                .histories
                .as_ref()
                .map(|_| histories::TrapIps::default()),
            planner: args
                .histories
                .as_ref()
                .filter(|spec| spec.needs_planning())
                .map(|spec| Planner {
                    spec: spec.clone(),
                    analyzer: Some(dprof_analysis::pipeline::Analyzer::new(
                        header, symbols, options,
                    )),
                    config,
                }),
        }
    }

    /// Looks at whole records as the device returned them, each decoded once.
    fn see(&mut self, bytes: &[u8]) {
        let mut analyzer = self.planner.as_mut().and_then(|p| p.analyzer.as_mut());
        if self.traps.is_none() && analyzer.is_none() {
            return;
        }
        let mut pos = 0;
        while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
            let Ok((header, record)) = dprof_abi::Record::decode(rest) else {
                return; // the writer reports bad records
            };
            if let Some(traps) = &mut self.traps {
                traps.note(&record);
            }
            if let Some(analyzer) = analyzer.as_mut() {
                analyzer.push(&header, &record);
            }
            pos += usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
        }
    }
}

/// What the collection loop needs besides the device, the file and the tap.
#[derive(Clone, Copy)]
struct Loop<'a> {
    args: &'a CollectArgs,
    version: &'a VersionInfo,
    signals: &'a Signals,
    progress: &'a ProgressBar,
    symbols: &'a Kallsyms,
}

/// Ends the planning phase: stops, drains, chooses what to watch from the samples so far,
/// and starts again with histories.
fn start_histories<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    batch: &mut Batch,
    tap: &mut Tap,
    run: &Loop,
) -> anyhow::Result<()> {
    dev.stop()?;
    drain(dev, writer, batch, tap, run.progress)?;
    let Some(mut planner) = tap.planner.take() else {
        return Ok(());
    };
    let Some(analyzer) = planner.analyzer.take() else {
        return Ok(());
    };
    let report = analyzer.finish();
    let types = histories::choose_types(&planner.spec, &report, run.symbols)?;
    let history_plan = histories::module_plan(&types, run.symbols, plan_limits(run.args))?;
    let described: Vec<String> = types.iter().map(histories::TypeSpec::to_string).collect();
    run.progress.suspend(|| {
        eprintln!(
            "dprof: histories: after {} of sampling, watching {}",
            units::format_ns(u64::try_from(run.args.plan_time.as_nanos()).unwrap_or(u64::MAX)),
            described.join(", ")
        );
    });
    planner.config.events |= dprof_abi::EVENT_HISTORIES;
    dev.configure(&planner.config)?;
    dev.history_plan(&history_plan)?;
    dev.start()?;
    Ok(())
}

pub(super) fn progress_bar() -> ProgressBar {
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

/// The child process being profiled.
pub(super) struct Workload {
    pub(super) child: Child,
    /// Set once it has exited.
    pub(super) status: Option<ExitStatus>,
}

impl Workload {
    pub(super) fn terminate(&self, signal: i32) {
        // The pid is our own child, not yet waited for, so it cannot have been reused.
        if let (Ok(pid), Ok(signal)) = (i32::try_from(self.child.id()), Signal::try_from(signal)) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// dprof's exit code once collection is over: the command's (waited for if dprof was
    /// interrupted first), or success without a command.
    pub(super) fn exit_code_of(
        workload: Option<Self>,
        signals: &Signals,
    ) -> anyhow::Result<ExitCode> {
        let Some(mut w) = workload else {
            return Ok(ExitCode::SUCCESS);
        };
        let status = match w.status {
            Some(status) => status,
            None => w.wait_after_interrupt(signals.which())?,
        };
        Ok(exit_code(status))
    }

    /// Waits for the command after dprof itself was interrupted. SIGINT from a terminal
    /// reaches the whole process group, so the command normally exits by itself; if it has
    /// not within a second (the signal was aimed at dprof alone), it is passed on.
    fn wait_after_interrupt(&mut self, signal: Option<i32>) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .try_wait()
                .context("cannot wait for the command")?
            {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let signal = signal.unwrap_or(libc::SIGTERM);
        eprintln!("dprof: passing signal {signal} on to the command and waiting for it to exit");
        self.terminate(signal);
        self.child.wait().context("cannot wait for the command")
    }
}

fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

/// SIGINT and SIGTERM: the first sets a flag the loop polls, a second exits at once.
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

    pub(super) fn which(&self) -> Option<i32> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }
}

fn collect_loop<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    run: Loop,
    tap: &mut Tap,
    workload: &mut Option<Workload>,
) -> anyhow::Result<StopInfo> {
    let Loop {
        args,
        version,
        signals,
        progress,
        ..
    } = run;
    let mut batch = Batch::new();
    dev.start()?;
    let start = Instant::now();
    // Started after the module so that its startup is in the profile.
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
    let mut last_progress: Option<Instant> = None;
    let mut lost = 0;
    let reason = loop {
        if let Some(signal) = signals.which() {
            break StopReason::Interrupted { signal };
        }
        if let Some(w) = workload.as_mut() {
            if let Some(status) = w.child.try_wait().context("cannot wait for the command")? {
                w.status = Some(status);
                break match status.signal() {
                    Some(signal) => StopReason::CommandKilled { signal },
                    None => StopReason::CommandExited {
                        status: status.code().unwrap_or(-1),
                    },
                };
            }
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            break StopReason::DurationElapsed;
        }
        if tap.planner.is_some() && start.elapsed() >= args.plan_time {
            start_histories(dev, writer, &mut batch, tap, &run)?;
        }
        match batch.read(dev, writer, tap)? {
            ReadOutcome::Data(_) => {}
            // A 0-byte read while running should not happen; waiting is the safe answer.
            ReadOutcome::Empty | ReadOutcome::Drained => std::thread::sleep(IDLE_SLEEP),
        }
        if last_progress.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
            last_progress = Some(Instant::now());
            if let Ok((status, _)) = dev.status(0) {
                lost = status.records_lost;
            }
            show_progress(progress, writer, lost, start.elapsed());
        }
    };
    let elapsed = start.elapsed();
    dev.stop()?;
    drain(dev, writer, &mut batch, tap, progress)?;
    if tap.planner.is_some() {
        warn(
            progress,
            "collection ended within --plan-time: no histories were collected (make it \
             longer than --plan-time, or give each --histories type its ranges)",
        );
    }
    let device = match dev.status(version.nr_cpu_ids as usize) {
        Ok((status, cpus)) => Some(DeviceCounters::from_status(&status, &cpus)),
        Err(e) => {
            warn(
                progress,
                &format!("cannot read the module's final counters: {e}"),
            );
            None
        }
    };
    Ok(StopInfo {
        reason,
        ended_unix_s: now_unix_s(),
        elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        device,
    })
}

/// Gathers reads in one buffer and writes it out when it is nearly full, at most a second
/// after the last write, and at the end, so that Records sections stay large when the
/// module hands out a few records per read.
struct Batch {
    buf: Vec<u8>,
    filled: usize,
    last_flush: Instant,
}

impl Batch {
    fn new() -> Self {
        Self {
            buf: vec![0u8; READ_BUFFER],
            filled: 0,
            last_flush: Instant::now(),
        }
    }

    /// One read; gathered records go to the writer when the buffer is nearly full, when the
    /// rings are empty and the last write is a second old, and when the rings are drained.
    fn read<B: Backend>(
        &mut self,
        dev: &mut B,
        writer: &mut ProfileWriter,
        tap: &mut Tap,
    ) -> anyhow::Result<ReadOutcome> {
        if self.buf.len() - self.filled < MIN_READ_ROOM {
            self.flush(writer, tap)?;
        }
        let outcome = dev.read(self.buf.get_mut(self.filled..).unwrap_or(&mut []))?;
        match outcome {
            ReadOutcome::Data(n) => self.filled = (self.filled + n).min(self.buf.len()),
            ReadOutcome::Empty if self.last_flush.elapsed() < FLUSH_EVERY => {}
            ReadOutcome::Empty | ReadOutcome::Drained => self.flush(writer, tap)?,
        }
        Ok(outcome)
    }

    fn flush(&mut self, writer: &mut ProfileWriter, tap: &mut Tap) -> anyhow::Result<()> {
        self.last_flush = Instant::now();
        if self.filled > 0 {
            let bytes = self.buf.get(..self.filled).unwrap_or(&[]);
            writer.write_records(bytes)?;
            tap.see(bytes);
            self.filled = 0;
        }
        Ok(())
    }
}

/// Reads what is left in the rings after stop, until the module says "drained" (0 bytes).
fn drain<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    batch: &mut Batch,
    tap: &mut Tap,
    progress: &ProgressBar,
) -> anyhow::Result<()> {
    match read_until_drained(progress, || batch.read(dev, writer, tap))? {
        DrainEnd::Drained => Ok(()),
        DrainEnd::GaveUp => batch.flush(writer, tap),
    }
}

/// How [`read_until_drained`] ended.
pub(super) enum DrainEnd {
    /// The module said drained.
    Drained,
    /// The module still answered EAGAIN after [`DRAIN_PATIENCE`] (warned).
    GaveUp,
}

/// Calls `read` (one read of the device) until the module says drained, after stop, waiting
/// at most [`DRAIN_PATIENCE`] while it answers EAGAIN. The one drain loop of `collect` and
/// `causal`.
pub(super) fn read_until_drained(
    progress: &ProgressBar,
    mut read: impl FnMut() -> anyhow::Result<ReadOutcome>,
) -> anyhow::Result<DrainEnd> {
    let mut idle_since: Option<Instant> = None;
    loop {
        match read()? {
            ReadOutcome::Data(_) => idle_since = None,
            ReadOutcome::Drained => return Ok(DrainEnd::Drained),
            ReadOutcome::Empty => {
                if idle_since.get_or_insert_with(Instant::now).elapsed() > DRAIN_PATIENCE {
                    warn(
                        progress,
                        "the module still answers EAGAIN 2 s after stop; finishing without \
                         the rest",
                    );
                    return Ok(DrainEnd::GaveUp);
                }
                std::thread::sleep(IDLE_SLEEP);
            }
        }
    }
}

fn show_progress(progress: &ProgressBar, writer: &ProfileWriter, lost: u64, elapsed: Duration) {
    let records = writer.record_count();
    #[expect(clippy::cast_precision_loss, reason = "display only")]
    let rate = records as f64 / elapsed.as_secs_f64().max(1e-3);
    progress.set_message(format!(
        "{records} records ({rate:.0}/s), {lost} lost, {}",
        format_bytes(writer.record_bytes())
    ));
}

/// The one-line summary, and a loud warning when records were lost.
fn report(path: &Path, records: u64, bytes: u64, stop: &StopInfo, ring_bytes: u32) {
    for line in report_lines(path, records, bytes, stop, ring_bytes) {
        eprintln!("{line}");
    }
}

fn report_lines(
    path: &Path,
    records: u64,
    bytes: u64,
    stop: &StopInfo,
    ring_bytes: u32,
) -> Vec<String> {
    let lost = stop.device.as_ref().map(|d| d.records_lost);
    let lost_text = lost.map_or_else(|| "? lost".to_owned(), |n| format!("{n} lost"));
    let mut lines = vec![format!(
        "dprof: {records} records, {lost_text}, {} in {} ({}, {})",
        format_bytes(bytes),
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
