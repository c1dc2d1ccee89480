//! What a front end asks of the drivers: plain settings, filled from its own arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use dprof_abi::{MAX_RING_BYTES, MIN_RING_BYTES};
use dprof_format::{CausalUnit, DelayAccounting, ProgressPointSpec};
use dprof_model::units::{self, format_ns};

use crate::histories::HistorySpec;
use crate::scope::Scope;

/// What `dprof collect` collects, and how.
#[derive(Clone, Debug)]
pub struct CollectOptions {
    /// The profile (written as its `.partial` until complete).
    pub output: PathBuf,
    /// Collect for this long instead of running a command.
    pub duration: Option<Duration>,
    /// Bytes of each per-CPU ring.
    pub ring_size: u32,
    /// What to record; `None` for what the module offers.
    pub events: Option<Vec<Event>>,
    /// The sampler's period as given.
    pub period: Option<Period>,
    /// Sample user mode too.
    pub sample_user: bool,
    /// Which sampler takes access samples.
    pub sampler: SamplerChoice,
    /// Object access histories.
    pub histories: Option<HistorySpec>,
    /// Histories started per second at most.
    pub history_rate: u32,
    /// A history's longest run, in ms.
    pub history_timeout_ms: u32,
    /// Accesses recorded per history at most.
    pub history_max_hits: u32,
    /// How long to sample before choosing what histories watch.
    pub plan_time: Duration,
    /// Where kernel code is read from at the end.
    pub kcore: PathBuf,
    /// The dprof device.
    pub device: PathBuf,
    /// Which collector to use.
    pub backend: BackendChoice,
    /// With the perf backend and slab events: trace the page allocator too (page@SITE
    /// types), at the cost of a call chain per page allocation.
    pub page_events: bool,
    /// The command to profile; collection stops when it exits.
    pub command: Vec<OsString>,
}

/// Which collector `dprof collect` uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// The module when its device exists, else perf events.
    #[default]
    Auto,
    /// `dprof.ko` through its device.
    Module,
    /// perf events and tracepoints, with no module.
    Perf,
}

/// Events the module can record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// Slab allocations and frees, and the names and sizes of slab caches.
    Slab,
    /// Access samples.
    Samples,
}

impl Event {
    /// Its `EVENT_*` bit.
    #[must_use]
    pub const fn bit(self) -> u32 {
        match self {
            Self::Slab => dprof_abi::EVENT_SLAB,
            Self::Samples => dprof_abi::EVENT_SAMPLES,
        }
    }

    /// Its name, as the profile header records it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Slab => "slab",
            Self::Samples => "samples",
        }
    }
}

/// The sampler a person can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerChoice {
    /// IBS, else PEBS, else software: the best this machine and the module offer.
    Auto,
    /// The cpu-clock timer.
    Software,
    /// AMD IBS op.
    Ibs,
    /// Intel PEBS load latency.
    Pebs,
}

/// A sampler's period as given: a time (software) or a count of events (IBS, PEBS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Period {
    /// A duration within what the module accepts, in ns, and how it was written.
    Time {
        /// The period in ns.
        ns: u32,
        /// As written.
        text: String,
    },
    /// A plain number.
    Count(u64),
}

/// Parses a per-CPU ring size: a power of two the ABI allows
/// ([`MIN_RING_BYTES`]`..=`[`MAX_RING_BYTES`], from the ABI).
///
/// # Errors
/// A sentence for the user when `s` is not a size, or not a ring size the ABI allows.
pub fn parse_ring_size(s: &str) -> Result<u32, String> {
    let bytes = units::parse_size(s)?;
    let (min, max) = (u64::from(MIN_RING_BYTES), u64::from(MAX_RING_BYTES));
    if !(min..=max).contains(&bytes) {
        return Err(format!(
            "{s:?} is outside {}..={}",
            units::format_bytes(min),
            units::format_bytes(max)
        ));
    }
    if !bytes.is_power_of_two() {
        return Err(format!(
            "{s:?} ({bytes} bytes) is not a power of two, e.g. {}",
            units::format_bytes(bytes.next_power_of_two())
        ));
    }
    u32::try_from(bytes).map_err(|_| format!("{s:?} is too large"))
}

/// Parses a period: a plain number is a count of events (checked against the sampler once
/// it is known); anything else is a time.
///
/// # Errors
/// A sentence saying why `s` is not a period.
pub fn parse_period(s: &str) -> Result<Period, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map(Period::Count)
            .map_err(|_| format!("{s:?} is too large"));
    }
    parse_period_time(s).map(|ns| Period::Time {
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

/// What `dprof causal` runs, and how.
#[derive(Clone, Debug)]
pub struct CausalOptions {
    /// The profile (written as its `.partial` until complete).
    pub output: PathBuf,
    /// Run for this long in all instead of running a command.
    pub duration: Option<Duration>,
    /// Progress points.
    pub progress: Vec<ProgressPointSpec>,
    /// Latency mode: the begin and end points.
    pub latency: Option<(ProgressPointSpec, ProgressPointSpec)>,
    /// What experiments speed up: data types, functions or modules.
    pub unit: CausalUnit,
    /// Which of them.
    pub selection: Selection,
    /// With [`Selection::Auto`]: how many of the most sampled.
    pub top: u32,
    /// Functions and modules: which functions are candidates.
    pub scope: Scope,
    /// Length of the profiling phase.
    pub plan_time: Duration,
    /// Length of the first experiment.
    pub experiment: Duration,
    /// Fewer visits than this of a progress point double the experiment length.
    pub min_visits: u64,
    /// Pause between experiments.
    pub cooloff: Duration,
    /// Seed of the random choice of types and speedups; `None` for the clock.
    pub seed: Option<u64>,
    /// Every sped-up experiment at this virtual speedup (percent) instead of one drawn from
    /// 5% to 100%.
    pub fixed_speedup: Option<u32>,
    /// Coz's end-to-end mode: after one profiling run of the command, this many more runs,
    /// each one experiment from the command's start to its exit, measured by the runs per
    /// effective second; no progress point is given.
    pub end_to_end: Option<u32>,
    /// Whose delay count the experiments keep: each task's (Coz's rules) or each CPU's.
    pub delay_accounting: DelayAccounting,
    /// Where requests arrive: a counted point whose visits the experiments count, and whose
    /// arriving task serves what it owes before each arrival.
    pub arrival: Option<ProgressPointSpec>,
    /// Load amplification: the delay each arrival inserts for every other task (ns), so that
    /// requests come this much sooner in effective time; needs `arrival`.
    pub arrival_speedup_ns: Option<u64>,
    /// The sampler's period as given.
    pub period: Option<Period>,
    /// Which sampler.
    pub sampler: SamplerChoice,
    /// Bytes of each per-CPU ring.
    pub ring_size: u32,
    /// The dprof device.
    pub device: PathBuf,
    /// The command to run; experiments stop when it exits.
    pub command: Vec<OsString>,
}

/// Which types, functions or modules causal experiments speed up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The most sampled ones of the profiling phase.
    Auto,
    /// These, by name.
    Named(Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::parse_ring_size;

    #[test]
    fn ring_sizes_are_powers_of_two_the_abi_allows() {
        assert_eq!(parse_ring_size("4M"), Ok(4 << 20));
        assert_eq!(
            parse_ring_size("3M"),
            Err("\"3M\" (3145728 bytes) is not a power of two, e.g. 4 MiB".to_owned())
        );
        assert_eq!(
            parse_ring_size("4K"),
            Err("\"4K\" is outside 64 KiB..=256 MiB".to_owned())
        );
    }
}
