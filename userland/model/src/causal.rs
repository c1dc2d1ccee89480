//! The causal view in the report: the experiments a session ran, and per progress point the
//! slope of program speedup against each type's virtual speedup, with the experiments left
//! out and why.

use serde::{Deserialize, Serialize};

/// Fewest distinct virtual speedups (0% included) a slope is fitted from.
pub const MIN_DISTINCT_SPEEDUPS: usize = 3;

/// The causal view of a profile's experiments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CausalReport {
    /// Progress points, `kind:name`, in plan order.
    pub points: Vec<String>,
    /// Latency mode: indices in `points` of the begin and the end point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<(usize, usize)>,
    /// Experiment length the collector aimed for at the start (ns).
    pub experiment_ns: u64,
    /// `dprof causal --fixed-speedup`: every sped-up experiment ran at this speedup
    /// (percent), and each slope is the mean program speedup there over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_speedup_percent: Option<u32>,
    /// `dprof causal --end-to-end RUNS`: each experiment was one whole run of the command,
    /// and the throughput is runs per effective second (Coz's end-to-end mode); `None` when
    /// experiments were timed slices of one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_to_end_runs: Option<u32>,
    /// Whose delay count the experiments kept.
    #[serde(default)]
    pub delay_accounting: DelayAccounting,
    /// `dprof causal --arrival`: where requests arrived, and what each arrival inserted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<Arrivals>,
    /// The type table, in table order.
    pub types: Vec<CausalType>,
    /// Every experiment seen, by experiment number.
    pub experiments: Vec<Experiment>,
    /// One per progress point (throughput), then the latency pair if any.
    pub analyses: Vec<Analysis>,
    /// What the view could not see, one sentence each.
    pub unseen: Vec<String>,
    /// Why there is nothing to rank or plot; absent when some type has a slope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_empty: Option<EmptyCausal>,
    /// Usable experiments in which tasks fell behind their delays; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fell_behind: Option<FellBehind>,
    /// `--scope` as given, when the module counted a kernel sample outside it for its first
    /// caller in it (up to `dprof_abi::MAX_CALLER_FRAMES` frames up); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callers_in_scope: Vec<String>,
}

/// Experiments in which the module's pauses could not keep up with the delays owed: a pause
/// serves at most 5 ms, and in these at least [`FellBehind::MIN_SHARE`] of the samples (and
/// [`FellBehind::MIN_PAUSES`] pauses) ended a pause at that cap with debt left. Code behind
/// its debt runs ahead of the slowed system it stands for, so those experiments' program
/// speedups read low.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FellBehind {
    /// Such experiments among the usable ones.
    pub experiments: usize,
    /// Usable experiments in all.
    pub usable: usize,
    /// Their capped pauses, together.
    pub capped_pauses: u64,
    /// The most a task (per CPU: a CPU) still owed right after a capped pause in them (ns).
    pub max_owed_ns: u64,
}

impl FellBehind {
    /// Share of an experiment's samples that must have capped a pause.
    pub const MIN_SHARE: f64 = 0.05;
    /// Capped pauses an experiment must have: a task first seen late in an experiment owes
    /// all the delay inserted so far, and one capped pause serving it is no sign of falling
    /// behind.
    pub const MIN_PAUSES: u64 = 3;

    /// Whether `m` fell behind its delays.
    #[must_use]
    pub fn in_experiment(m: &Measurement) -> bool {
        m.capped_pauses >= Self::MIN_PAUSES
            && m.capped_pauses as f64 >= Self::MIN_SHARE * m.samples as f64
    }

    /// Over `experiments`' usable ones; `None` when none fell behind.
    #[must_use]
    pub fn of(experiments: &[Experiment]) -> Option<Self> {
        let usable: Vec<&Measurement> = experiments
            .iter()
            .filter(|e| e.discarded.is_none())
            .filter_map(|e| e.measured.as_ref())
            .collect();
        let behind: Vec<&&Measurement> = usable.iter().filter(|m| Self::in_experiment(m)).collect();
        (!behind.is_empty()).then(|| Self {
            experiments: behind.len(),
            usable: usable.len(),
            capped_pauses: behind.iter().map(|m| m.capped_pauses).sum(),
            max_owed_ns: behind
                .iter()
                .map(|m| m.max_owed_after_pause_ns)
                .max()
                .unwrap_or(0),
        })
    }

    /// The warning, in one sentence for every front end.
    #[must_use]
    pub fn note(&self) -> String {
        format!(
            "warning: tasks fell behind their delays in {} of {} usable experiments ({} pauses \
             stopped at the 5 ms cap with more owed, up to {:.1} ms): that code ran ahead of \
             the slowed system, so those experiments' speedups read low; insert less delay \
             (a smaller --arrival-speedup, a lower --fixed-speedup) or sample more often \
             (a shorter --period gives more pauses)",
            self.experiments,
            self.usable,
            self.capped_pauses,
            self.max_owed_ns as f64 / 1e6
        )
    }
}

/// The arrival point of a session, and its load amplification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrivals {
    /// Index in [`CausalReport::points`] of the point where requests arrived.
    pub point: usize,
    /// Delay each arrival inserted for every other task (ns), in every experiment: 0 when the
    /// load was not amplified (`--arrival` without `--arrival-speedup`).
    pub delay_per_arrival_ns: u64,
}

/// How the experiments owed and paid their delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayAccounting {
    /// Per task (Coz's rules for threads): a task woken by an interrupt serves the delays
    /// inserted while it slept; one woken by another task is credited with what that task
    /// served.
    Task,
    /// Per CPU: a CPU found idle is credited with what it owes, which forgives a task woken by
    /// a timer the delays of its sleep. Profiles from before the choice.
    #[default]
    Cpu,
}

/// Why a causal report ranks no type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EmptyCausalReason {
    /// Every experiment was discarded, by every analysis ([`CausalReport::discard_groups`]):
    /// there is not one point to plot.
    NoUsableExperiment,
    /// Some experiments were used, but no type has a slope for any progress measure
    /// ([`NoSlope`] says why, per type).
    NoSlope,
}

/// Why the causal report ranks no type, for programs (`reason`) and for people (`message`,
/// which every front end shows as it is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyCausal {
    /// Why.
    pub reason: EmptyCausalReason,
    /// One sentence saying so, and what would give a ranking.
    pub message: String,
}

/// What an entry of the type table speeds up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CausalUnit {
    /// The accesses to a data type.
    #[default]
    Type,
    /// Every instruction of a kernel function.
    Function,
    /// The instructions of a module's functions (`vmlinux`: the core kernel).
    Module,
}

impl CausalUnit {
    /// The unit in one word: `type`, `function`, `module`.
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Self::Type => "type",
            Self::Function => "function",
            Self::Module => "module",
        }
    }

    /// The plural: `types`, `functions`, `modules`.
    #[must_use]
    pub const fn plural(self) -> &'static str {
        match self {
            Self::Type => "types",
            Self::Function => "functions",
            Self::Module => "modules",
        }
    }

    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's skip_serializing_if passes a reference"
    )]
    fn is_type(&self) -> bool {
        *self == Self::Type
    }
}

/// One entry of the type table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CausalType {
    /// Index in the table (`ExperimentControl.type_index`).
    pub index: usize,
    /// What the entry speeds up; absent for a data type.
    #[serde(default, skip_serializing_if = "CausalUnit::is_type")]
    pub unit: CausalUnit,
    /// The type's name as the data profile names it, the function's as kallsyms lists it, or
    /// the module's (`vmlinux` for the core kernel).
    pub name: String,
    /// A function's loadable module; absent for the core kernel's functions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// A module's functions whose instructions were sped up, most sampled first (up to the
    /// instructions one entry takes); empty for other units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// A module's functions in scope left out by that cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub functions_left_out: usize,
    /// Samples of the type in the profiling phase that chose the types.
    pub plan_samples: u64,
    /// Rank by `plan_samples` among the table's types (1: most sampled); `None` for a type
    /// with none.
    pub data_profile_rank: Option<usize>,
    /// Experiments that selected it, whatever became of them.
    pub selected: usize,
    /// Samples on its accesses during its experiments that ended: a type with none had no
    /// delay inserted, so its sped-up experiments are discarded
    /// ([`Discard::NoDelayInserted`]).
    pub experiment_samples: u64,
}

impl CausalType {
    /// The entry as people read it, the same in every front end and in Coz's format: a
    /// type's or a core-kernel function's name, `name [module]` for a module's function (as
    /// kallsyms writes it), `[module]` for a module (`[vmlinux]`: the core kernel).
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
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One experiment, as its records say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// The collector's number for it.
    pub experiment: u32,
    /// Index in the type table (may be outside it: see [`Discard::TypeNotInTable`]).
    pub type_index: u32,
    /// Virtual speedup, percent.
    pub speedup_percent: u32,
    /// What its end record measured; `None` when it has none.
    pub measured: Option<Measurement>,
    /// Why no analysis uses it at all; `None` when it is usable.
    pub discarded: Option<Discard>,
}

/// What an `ExperimentEnd` measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurement {
    /// Ended by the session's stop rather than by the collector.
    pub cut_short: bool,
    /// Wall time from start to end (ns).
    pub wall_ns: u64,
    /// Delay every CPU was asked to serve (ns).
    pub delay_ns: u64,
    /// Pauses actually served, all CPUs together (ns).
    pub paused_ns: u64,
    /// Delay forgiven (ns): per task, to tasks woken by a task that had served it; per CPU,
    /// to idle CPUs.
    pub credited_ns: u64,
    /// Per task: the module's task table was full, so some task's delays were kept per CPU
    /// for part of the experiment.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub task_table_full: bool,
    /// Samples on the experiment's type.
    pub type_samples: u64,
    /// All samples.
    pub samples: u64,
    /// Of `delay_ns`, what the arrivals inserted (ns): their visits times the delay per
    /// arrival, to within one arrival (the module counts visits and inserts delays a few
    /// instructions apart); 0 without load amplification.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub arrival_delay_ns: u64,
    /// Visits of each progress point, in plan order.
    pub points: Vec<PointCount>,
    /// With a latency pair, from a module that weighs its delays: the sum of each delay
    /// inserted times the requests in flight then (request x ns), the time the pauses stand
    /// for in the in-flight integral. `None` from older profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_delay: Option<u64>,
    /// Pauses that served the module's longest pause (5 ms) and left debt.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub capped_pauses: u64,
    /// The most a task (per CPU: a CPU) still owed right after one of those pauses (ns).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub max_owed_after_pause_ns: u64,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Visits of one progress point during an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointCount {
    /// Visits during the experiment.
    pub visits: u64,
    /// Sum over them of the time since the experiment began (ns).
    pub time_sum_ns: u64,
    /// Visits since the session began, this experiment's included.
    pub total: u64,
}

impl Measurement {
    /// Wall time minus inserted delay (ns); not positive for an unusable experiment.
    #[must_use]
    pub fn effective_ns(&self) -> i64 {
        let effective = i128::from(self.wall_ns) - i128::from(self.delay_ns);
        effective.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// The load amplification the arrivals' delays made: arrivals per effective second over
    /// arrivals per second of the same experiment without those delays, `(wall - type
    /// delay) / (wall - all delay)`; 1 without them, `None` when no effective time is left.
    #[must_use]
    pub fn amplification(&self) -> Option<f64> {
        let effective = self.effective_ns();
        if effective <= 0 {
            return None;
        }
        Some((effective as f64 + self.arrival_delay_ns as f64) / effective as f64)
    }

    /// The integral over the experiment's wall time of the requests in flight between the
    /// points `begin` and `end` (request x ns), by the formula in the module's doc; `None`
    /// when a point is missing.
    #[must_use]
    pub fn in_flight_integral_wall(&self, begin: usize, end: usize) -> Option<f64> {
        let (b, e) = (self.points.get(begin)?, self.points.get(end)?);
        let wall = self.wall_ns as f64;
        let before = |p: &PointCount| p.total.saturating_sub(p.visits) as f64;
        let in_flight_at_start = before(b) - before(e);
        let during = |p: &PointCount| p.visits as f64 * wall - p.time_sum_ns as f64;
        Some(in_flight_at_start * wall + during(b) - during(e))
    }

    /// Mean requests in flight between `begin` and `end` over the experiment.
    #[must_use]
    pub fn mean_in_flight(&self, begin: usize, end: usize) -> Option<f64> {
        if self.wall_ns == 0 {
            return None;
        }
        Some(self.in_flight_integral_wall(begin, end)? / self.wall_ns as f64)
    }
}

/// Why an experiment was left out, of every analysis or of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Discard {
    /// Its type index is not in the profile's type table.
    TypeNotInTable,
    /// An end record with no start record of its number.
    EndWithoutStart,
    /// An end record whose type or speedup differs from its start's.
    ControlMismatch,
    /// A start record with no end record (the records were lost, or the file was cut).
    StartWithoutEnd,
    /// Ended by the session's stop, not after the length the collector chose.
    CutShort,
    /// The inserted delay is not shorter than the wall time: no effective time to divide by.
    NoEffectiveTime,
    /// Its end record counts a different number of progress points than the header names.
    PointCountMismatch,
    /// A sped-up experiment that inserted no delay: no sample fell on its type's
    /// instructions while it ran, so it did not speed the type up at all.
    NoDelayInserted,
    /// No visit of the progress point analysed (latency: of the end point).
    ZeroVisits,
    /// Latency: no request in flight over the experiment by the counts.
    NoRequestsInFlight,
    /// Its type has no usable 0% experiment to compare with.
    NoBaseline,
}

impl Discard {
    /// Every reason, in report order.
    pub const ALL: [Self; 11] = [
        Self::TypeNotInTable,
        Self::EndWithoutStart,
        Self::ControlMismatch,
        Self::StartWithoutEnd,
        Self::CutShort,
        Self::NoEffectiveTime,
        Self::PointCountMismatch,
        Self::NoDelayInserted,
        Self::ZeroVisits,
        Self::NoRequestsInFlight,
        Self::NoBaseline,
    ];

    /// The reason in a few words.
    #[must_use]
    pub const fn describe(self) -> &'static str {
        match self {
            Self::TypeNotInTable => "type index not in the type table",
            Self::EndWithoutStart => "end record without its start",
            Self::ControlMismatch => "end record does not match its start",
            Self::StartWithoutEnd => "start record without an end",
            Self::CutShort => "cut short by the end of the session",
            Self::NoEffectiveTime => "too short: inserted delay not below wall time",
            Self::PointCountMismatch => "progress point count differs from the header",
            Self::NoDelayInserted => {
                "sped up but no delay inserted (no sample of the type's instructions)"
            }
            Self::ZeroVisits => "zero visits",
            Self::NoRequestsInFlight => "no request in flight",
            Self::NoBaseline => "no 0% baseline for its type",
        }
    }
}

/// What one analysis measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// Visits per second of one progress point (higher is better).
    Throughput {
        /// Index in [`CausalReport::points`].
        point: usize,
    },
    /// Mean time between a begin and an end point (lower is better).
    Latency {
        /// Index of the begin point.
        begin: usize,
        /// Index of the end point.
        end: usize,
    },
}

impl Target {
    /// The unit of [`TypeSlope::baseline`] and [`SpeedupPoint::value`].
    #[must_use]
    pub const fn unit(self) -> &'static str {
        match self {
            Self::Throughput { .. } => "visits/s",
            Self::Latency { .. } => "ns",
        }
    }

    /// `v` in this measure's unit, as people read it: whole numbers from 100 up, three
    /// significant digits below (an end-to-end session's 1.23 runs per second).
    #[must_use]
    pub fn format(self, v: f64) -> String {
        let decimals = match v.abs() {
            a if a >= 100.0 => 0,
            a if a >= 10.0 => 1,
            a if a >= 1.0 => 2,
            _ => 3,
        };
        format!("{v:.decimals$} {}", self.unit())
    }
}

/// The ranking of the types by their effect on one progress measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// What is measured.
    pub target: Target,
    /// The point's `kind:name`, or `begin -> end` for latency.
    pub name: String,
    /// Every type of the table: those with a slope by slope, highest first, then the others.
    pub types: Vec<TypeSlope>,
    /// Experiments usable in general that this analysis could not use, by experiment number.
    pub discarded: Vec<Discarded>,
}

impl Analysis {
    /// For the throughput of a sampled point (`sampled:FUNCTION`), the sentence that says how
    /// to read its visits; `None` for counted points and latency.
    #[must_use]
    pub fn sampled_note(&self) -> Option<&'static str> {
        (matches!(self.target, Target::Throughput { .. }) && self.name.starts_with("sampled:"))
            .then_some(
                "sampled point: its visits are the samples whose ip lay in the function, one \
                 per sampling period spent there, not calls; a noisy measure that needs \
                 longer experiments than a counted point",
            )
    }
}

/// An experiment an analysis left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discarded {
    /// The experiment's number.
    pub experiment: u32,
    /// Its type index.
    pub type_index: u32,
    /// Its virtual speedup, percent.
    pub speedup_percent: u32,
    /// Why.
    pub reason: Discard,
}

/// One type's effect on one progress measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeSlope {
    /// Index in the type table.
    pub type_index: usize,
    /// The type's name.
    pub name: String,
    /// Rank by slope (1: the steepest rise); `None` without a slope.
    pub rank: Option<usize>,
    /// Rank in the data profile of the planning phase ([`CausalType::data_profile_rank`]).
    pub data_profile_rank: Option<usize>,
    /// Samples in the planning phase.
    pub plan_samples: u64,
    /// Experiments used, the baseline's included.
    pub experiments: usize,
    /// Of them, at 0% virtual speedup.
    pub baseline_experiments: usize,
    /// The pooled 0% measure ([`Target::unit`]).
    pub baseline: Option<f64>,
    /// Experiments pooled per virtual speedup, by speedup: what plots and Coz's format show.
    pub speedups: Vec<SpeedupPoint>,
    /// Each experiment used: the points the slope is fitted to.
    pub experiment_points: Vec<ExperimentPoint>,
    /// The slope, or why there is none.
    pub fit: Fit,
}

/// A type's experiments at one virtual speedup, pooled.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedupPoint {
    /// Virtual speedup, percent.
    pub speedup_percent: u32,
    /// Experiments pooled.
    pub experiments: usize,
    /// Pooled measure ([`Target::unit`]).
    pub value: f64,
    /// Against the baseline (0.1: 10% faster).
    pub program_speedup: f64,
}

/// One experiment's program speedup.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentPoint {
    /// The experiment's number.
    pub experiment: u32,
    /// Virtual speedup, percent.
    pub speedup_percent: u32,
    /// Its measure ([`Target::unit`]).
    pub value: f64,
    /// Against its local baseline: the 0% experiments just before and after it.
    pub program_speedup: f64,
}

/// A type's slope, or why it has none.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fit {
    /// Fitted.
    Slope(Slope),
    /// Not fitted.
    NoSlope {
        /// Why.
        reason: NoSlope,
        /// Distinct virtual speedups among the experiments used.
        distinct_speedups: usize,
    },
}

impl Fit {
    /// The slope, if fitted.
    #[must_use]
    pub const fn slope(&self) -> Option<&Slope> {
        match self {
            Self::Slope(s) => Some(s),
            Self::NoSlope { .. } => None,
        }
    }
}

/// Why a type has no slope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoSlope {
    /// No experiment selected it.
    NeverSelected,
    /// Experiments selected it, and every one was discarded.
    AllDiscarded,
    /// None of its usable experiments was at 0%.
    NoBaseline,
    /// Fewer than [`MIN_DISTINCT_SPEEDUPS`] distinct virtual speedups.
    TooFewSpeedups,
    /// `--fixed-speedup`: fewer than two sped-up experiments, too few for an interval.
    TooFewExperiments,
}

impl NoSlope {
    /// The reason in a few words.
    #[must_use]
    pub fn describe(self, distinct_speedups: usize) -> String {
        match self {
            Self::NeverSelected => "never selected".to_owned(),
            Self::AllDiscarded => "every experiment discarded".to_owned(),
            Self::NoBaseline => "no 0% baseline".to_owned(),
            Self::TooFewSpeedups => format!(
                "{distinct_speedups} distinct speedup{}, {MIN_DISTINCT_SPEEDUPS} needed",
                if distinct_speedups == 1 { "" } else { "s" }
            ),
            Self::TooFewExperiments => "fewer than 2 sped-up experiments".to_owned(),
        }
    }
}

/// Program speedup against virtual speedup, fitted by least squares.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slope {
    /// Program speedup per unit of virtual speedup (0.5: a 10% faster type, a 5% faster
    /// program).
    pub slope: f64,
    /// Program speedup the fitted line gives at 0% (near 0 when the baseline is sound).
    pub intercept: f64,
    /// Lower end of the 95% confidence interval.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Standard error of the slope.
    pub std_error: f64,
    /// Student's t at 97.5% with `points - 2` degrees of freedom.
    pub t_critical: f64,
    /// Points fitted (experiments).
    pub points: usize,
    /// Distinct virtual speedups among them.
    pub distinct_speedups: usize,
    /// The interval is wholly below 0: speeding the type up slows the program (contention).
    pub hurts: bool,
    /// The interval contains 0: no effect told apart from noise.
    pub within_noise: bool,
}

/// Experiments discarded for one reason, in one analysis or in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscardGroup {
    /// The reason.
    pub reason: Discard,
    /// The analysis's name; `None` for experiments no analysis uses.
    pub analysis: Option<String>,
    /// The experiments' numbers.
    pub experiments: Vec<u32>,
}

impl CausalReport {
    /// The load amplification over the usable experiments: the lowest, the one of them all
    /// pooled (`(wall - type delay) / (wall - all delay)` summed over them) and the highest;
    /// `None` without amplified arrivals or a usable experiment.
    #[must_use]
    pub fn amplification(&self) -> Option<[f64; 3]> {
        if self.arrivals?.delay_per_arrival_ns == 0 {
            return None;
        }
        let used: Vec<&Measurement> = self
            .experiments
            .iter()
            .filter(|e| e.discarded.is_none())
            .filter_map(|e| e.measured.as_ref())
            .collect();
        let each: Vec<f64> = used.iter().filter_map(|m| m.amplification()).collect();
        let low = each.iter().copied().reduce(f64::min)?;
        let high = each.iter().copied().reduce(f64::max)?;
        let effective: f64 = used.iter().map(|m| m.effective_ns().max(0) as f64).sum();
        let arrivals: f64 = used.iter().map(|m| m.arrival_delay_ns as f64).sum();
        Some([low, (effective + arrivals) / effective, high])
    }

    /// What the arrival point did, in one sentence for every front end; `None` without one.
    #[must_use]
    pub fn load_note(&self) -> Option<String> {
        let arrivals = self.arrivals?;
        let point = self
            .points
            .get(arrivals.point)
            .map_or("the arrival point", String::as_str);
        if arrivals.delay_per_arrival_ns == 0 {
            return Some(format!(
                "load: requests arrive at {point}, not amplified (no --arrival-speedup); an \
                 arriving task serves its delays first, so virtual speedups leave the arrivals' \
                 pace as it is"
            ));
        }
        let per_arrival = format!("{:.1} us", arrivals.delay_per_arrival_ns as f64 / 1e3);
        Some(match self.amplification() {
            Some([low, pooled, high]) => format!(
                "load: amplified {pooled:.2}x ({low:.2}x to {high:.2}x over the usable \
                 experiments): each arrival at {point} inserted {per_arrival} for every other \
                 task, so requests came that much sooner each in effective time"
            ),
            None => format!(
                "load: each arrival at {point} inserted {per_arrival} for every other task; no \
                 usable experiment measured the amplification"
            ),
        })
    }

    /// Delay forgiven over every measured experiment (ns).
    #[must_use]
    pub fn credited_ns(&self) -> u64 {
        self.experiments
            .iter()
            .filter_map(|e| e.measured.as_ref())
            .map(|m| m.credited_ns)
            .sum()
    }

    /// Experiments in which some task's delays were kept per CPU for want of room.
    #[must_use]
    pub fn task_table_full_experiments(&self) -> usize {
        self.experiments
            .iter()
            .filter(|e| e.measured.as_ref().is_some_and(|m| m.task_table_full))
            .count()
    }

    /// Discarded experiments grouped by reason: those no analysis uses first, then each
    /// analysis's own.
    #[must_use]
    pub fn discard_groups(&self) -> Vec<DiscardGroup> {
        let mut groups = Vec::new();
        for reason in Discard::ALL {
            let experiments: Vec<u32> = self
                .experiments
                .iter()
                .filter(|e| e.discarded == Some(reason))
                .map(|e| e.experiment)
                .collect();
            if !experiments.is_empty() {
                groups.push(DiscardGroup {
                    reason,
                    analysis: None,
                    experiments,
                });
            }
        }
        for analysis in &self.analyses {
            for reason in Discard::ALL {
                let experiments: Vec<u32> = analysis
                    .discarded
                    .iter()
                    .filter(|d| d.reason == reason)
                    .map(|d| d.experiment)
                    .collect();
                if !experiments.is_empty() {
                    groups.push(DiscardGroup {
                        reason,
                        analysis: Some(analysis.name.clone()),
                        experiments,
                    });
                }
            }
        }
        groups
    }

    /// Experiments that no analysis can use.
    #[must_use]
    pub fn discarded_experiments(&self) -> usize {
        self.experiments
            .iter()
            .filter(|e| e.discarded.is_some())
            .count()
    }

    /// The type table's entry `index`.
    #[must_use]
    pub fn causal_type(&self, index: usize) -> Option<&CausalType> {
        self.types.get(index)
    }

    /// What the table's entries are: their unit when they share one (every table
    /// `dprof causal` writes), else `None`.
    #[must_use]
    pub fn unit(&self) -> Option<CausalUnit> {
        let first = self.types.first().map_or(CausalUnit::Type, |t| t.unit);
        self.types.iter().all(|t| t.unit == first).then_some(first)
    }

    /// The entries in one word, plural: `types`, `functions`, `modules`, or `units` for a
    /// mixed table.
    #[must_use]
    pub fn units_plural(&self) -> &'static str {
        self.unit().map_or("units", CausalUnit::plural)
    }

    /// The entries in one word: `type`, `function`, `module`, or `unit`.
    #[must_use]
    pub fn unit_word(&self) -> &'static str {
        self.unit().map_or("unit", CausalUnit::word)
    }

    /// [`CausalType::label`] of entry `index`, or its index in brackets when the table has
    /// no such entry.
    #[must_use]
    pub fn label_of(&self, index: usize) -> String {
        self.types
            .get(index)
            .map_or_else(|| format!("#{index}"), CausalType::label)
    }
}
