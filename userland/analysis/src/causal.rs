//! Causal experiments that rank data types (Coz's method, with data types in place of source
//! lines): which type's accesses, made faster, would make the program faster, and by how much.
//!
//! The collector (`dprof causal`) runs experiments. Each picks a type of the profile's type
//! table and a virtual speedup (0 to 100% in 5% steps, 0% about half of the time), and every
//! sample on that type's accesses delays every other CPU by `speedup x sample period`. Its
//! `ExperimentEnd` record gives the wall time, the delay inserted and the visits of each
//! progress point. This module turns those records into a [`CausalReport`]; it does no I/O
//! beyond [`read_experiments`], which takes the records out of a [`Profile`].
//!
//! # What is computed, and why
//! - **Effective duration** = `wall_ns - delay_ns`: the time the program would have taken
//!   without the inserted pauses (Coz's rule). Experiments whose effective duration is not
//!   positive are discarded.
//! - **What was inserted**: a sped-up experiment during which no sample fell on its type's
//!   instructions inserted no delay and sped nothing up. It is discarded
//!   ([`Discard::NoDelayInserted`]), not counted at its nominal speedup.
//! - **Load amplification** (`--arrival-speedup`): every arrival inserted the session's
//!   delay per arrival, in every experiment, 0% ones included, so each pair compares two
//!   experiments at about the same amplified load. Of an experiment's delay, the arrivals'
//!   is their visits times the delay per arrival ([`Measurement::arrival_delay_ns`]); its
//!   amplification is `(wall - type delay) / (wall - all delay)`: how much sooner requests
//!   came in effective time than they would have without the arrivals' delays.
//! - **Throughput** of a progress point = visits / effective duration (visits per second).
//! - **Latency** (a begin and an end point) by Little's law. The module counts, per point,
//!   the visits, the sum over them of the time since the experiment began (`time_sum_ns`) and
//!   the visits since the session began (`total`). With `T` the experiment's wall time, the
//!   integral over the experiment of the requests in flight is
//!   `in_flight_at_start * T + (visits * T - time_sum_ns)(begin) - (visits * T -
//!   time_sum_ns)(end)`, where `in_flight_at_start = (total - visits)(begin) - (total -
//!   visits)(end)`: a request begun at time `t` is in flight for `T - t` of the experiment, one
//!   that ended at `t` is missing for `T - t`. That integral is in wall time, inserted pauses
//!   included, during which requests stay in flight. The pauses stand for time the program
//!   would not have spent, and each kept the requests then in flight in flight for its length:
//!   the module sums each delay it inserts times the requests in flight at that moment
//!   (`ExperimentEnd::in_flight_delay`), and that sum is taken off the integral to put it in
//!   effective time, as the throughput's denominator is. Profiles from before ABI 9 lack the
//!   sum, and their integral is scaled by `effective / wall`, which assumes requests are in
//!   flight as much during the pauses as on average: when the sped-up code serves the requests,
//!   pauses fall while requests are in flight, and that overstated the latency. The mean
//!   latency is then that effective integral divided by the end point's visits (the
//!   departures): Little's law `L = N / lambda` with `N` the mean in flight and `lambda` the
//!   departure rate, both over effective time. Experiments with no departure, or with a
//!   non-positive integral (counts that cannot be), are discarded.
//! - **Program speedup** of an experiment, against the same type's 0% experiments (Coz
//!   measures a baseline per line so that the cost of the delay machinery itself, which
//!   depends on the line, cancels out): `rate / baseline - 1` for throughput, `baseline /
//!   latency - 1` for latency (positive: faster). The baseline pools the type's 0%
//!   experiments as Coz combines experiments, summing visits (latency: integrals) and
//!   effective durations (latency: departures): a mean weighted by effective duration, so a
//!   short experiment counts less than a long one.
//! - **Slope**: least squares of program speedup against virtual speedup (both fractions)
//!   over the type's sped-up experiments, each one point against its own baseline: the 0%
//!   experiments just before and just after it, of any type ([`local_baseline`]). The
//!   machine's speed drifts over a run by more than a type's effect, so `dprof causal` runs
//!   every sped-up experiment next to a 0% one, and neighbours share its conditions; one on
//!   each side cancels a drift that goes one way (measured under QEMU, 5 runs: the slopes'
//!   intervals 5-33% narrower than against the nearest 0% experiment of the same type).
//!   The fitted line has an intercept, which takes any cost of inserting delays at all
//!   (measured under QEMU: a few percent either way), so that only the dose-response makes
//!   the slope. Experiments are kept as points rather than averaged per speedup so that the
//!   residuals measure the scatter between experiments; [`TypeSlope::speedups`] holds
//!   the per-speedup pooled points for plots and Coz's format. The 95% confidence interval is
//!   `slope +- t(0.975, n - 2) x standard error`, with Student's t computed here
//!   ([`student_t_quantile`]). A slope needs a baseline and at least
//!   [`MIN_DISTINCT_SPEEDUPS`] distinct virtual speedups (0% included); a type without is
//!   listed with the reason, never with a made-up slope.
//! - Types are ranked by slope, highest first. An interval wholly below 0 is flagged
//!   [`Slope::hurts`] (speeding the type up slows the program: contention, Coz's downward
//!   slopes); one that contains 0 [`Slope::within_noise`].
//!
//! Every experiment the analysis could not use is listed with its [`Discard`] reason.

mod stats;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use dprof_abi::{ExperimentEnd, ExperimentStart, EXPERIMENT_CUT_SHORT, EXPERIMENT_TASK_TABLE_FULL};

use dprof_format::{
    CausalCollectConfig, ExperimentRecord, Profile, ProfileError, ProgressPointSpec,
};

use dprof_model::causal::{
    Analysis, Arrivals, CausalReport, CausalType, CausalUnit, DelayAccounting, Discard, Discarded,
    EmptyCausal, EmptyCausalReason, Experiment, ExperimentPoint, FellBehind, Fit, Measurement,
    NoSlope, PointCount, Slope, SpeedupPoint, Target, TypeSlope, MIN_DISTINCT_SPEEDUPS,
};
pub use stats::{student_t_quantile, LineFit, MeanFit};

/// The confidence of [`Slope`]'s interval.
pub const CONFIDENCE: f64 = 0.95;

/// Why a profile gives no causal report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CausalError {
    /// The header has no causal configuration: the profile was not collected by
    /// `dprof causal`.
    #[error(
        "the profile has no causal experiments: it was not collected by dprof causal, which \
         runs them"
    )]
    NotCausal,
    /// The configuration is there but no experiment record is.
    #[error(
        "the profile has no causal experiments: dprof causal ended before the first one \
         (collect for longer)"
    )]
    NoExperiments,
    /// Reading the records failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// The experiment records of `profile`, in file order (a pass over its records).
///
/// # Errors
/// The first problem found while reading the records (see [`Profile::records`]).
pub fn read_experiments(profile: &Profile) -> Result<Vec<ExperimentRecord>, ProfileError> {
    let mut found = Vec::new();
    for record in profile.records() {
        let (_, record) = record?;
        found.extend(ExperimentRecord::of(&record));
    }
    Ok(found)
}

/// The causal report of `profile`: [`read_experiments`] then [`analyze`].
///
/// # Errors
/// [`CausalError::NotCausal`] without a causal configuration, [`CausalError::NoExperiments`]
/// without an experiment record, [`CausalError::Profile`] when the records cannot be read.
pub fn analyze_profile(profile: &Profile) -> Result<CausalReport, CausalError> {
    let config = profile
        .header()
        .config
        .causal
        .as_ref()
        .ok_or(CausalError::NotCausal)?;
    let records = read_experiments(profile)?;
    if records.is_empty() {
        return Err(CausalError::NoExperiments);
    }
    Ok(analyze(config, &records))
}

/// The causal report of a session: its configuration and its experiment records in file
/// order. Records are paired by experiment number, so an end read before its start (they may
/// sit in different CPUs' rings) still finds it.
#[must_use]
pub fn analyze(config: &CausalCollectConfig, records: &[ExperimentRecord]) -> CausalReport {
    let experiments = pair_experiments(config, records);
    let types = type_table(config, &experiments);
    let analyses = targets(config)
        .into_iter()
        .map(|target| analyze_target(config, &types, &experiments, target))
        .collect();
    let mut report = CausalReport {
        points: config.points.iter().map(ProgressPointSpec::label).collect(),
        latency: config.latency,
        experiment_ns: config.experiment_ns,
        fixed_speedup_percent: config.fixed_speedup_percent,
        end_to_end_runs: config.end_to_end_runs,
        delay_accounting: match config.delay_accounting {
            dprof_format::DelayAccounting::Task => DelayAccounting::Task,
            dprof_format::DelayAccounting::Cpu => DelayAccounting::Cpu,
        },
        arrivals: config.arrival.map(|point| Arrivals {
            point,
            delay_per_arrival_ns: config.arrival_delay_ns,
        }),
        types,
        experiments,
        analyses,
        unseen: Vec::new(),
        why_empty: None,
        fell_behind: None,
        callers_in_scope: if config.callers_in_scope {
            config.scope.clone()
        } else {
            Vec::new()
        },
    };
    report.fell_behind = FellBehind::of(&report.experiments);
    report.unseen = unseen(&report);
    report.why_empty = why_empty(&report);
    report
}

/// Pairs start and end records by experiment number and checks each experiment.
fn pair_experiments(config: &CausalCollectConfig, records: &[ExperimentRecord]) -> Vec<Experiment> {
    // Started and not yet ended, by number; a start whose number comes again before its end
    // is kept as a start without an end.
    let mut open: BTreeMap<u32, ExperimentStart> = BTreeMap::new();
    // Ends read before their start (the two may sit in different CPUs' rings), by number.
    let mut early_ends: BTreeMap<u32, ExperimentEnd> = BTreeMap::new();
    // (number, arrival, experiment): sorted by number, a reused number in arrival order.
    let mut done: Vec<(u32, usize, Experiment)> = Vec::new();
    let mut push = |e: Experiment| {
        let arrival = done.len();
        done.push((e.experiment, arrival, e));
    };
    for record in records {
        match record {
            ExperimentRecord::Start(start) => {
                let number = start.control.experiment;
                if let Some(end) = early_ends.remove(&number) {
                    push(paired(config, start, &end));
                } else if let Some(previous) = open.insert(number, *start) {
                    push(unmatched_start(&previous));
                }
            }
            ExperimentRecord::End(end) => {
                let number = end.control.experiment;
                if let Some(start) = open.remove(&number) {
                    push(paired(config, &start, end));
                } else if let Some(previous) = early_ends.insert(number, *end) {
                    push(unmatched_end(config, &previous));
                }
            }
        }
    }
    for start in open.values() {
        push(unmatched_start(start));
    }
    for end in early_ends.values() {
        push(unmatched_end(config, end));
    }
    done.sort_by_key(|&(number, arrival, _)| (number, arrival));
    done.into_iter().map(|(_, _, e)| e).collect()
}

fn paired(
    config: &CausalCollectConfig,
    start: &ExperimentStart,
    end: &ExperimentEnd,
) -> Experiment {
    let discarded = if start.control == end.control {
        check_end(config, end)
    } else {
        Some(Discard::ControlMismatch)
    };
    Experiment {
        experiment: end.control.experiment,
        type_index: end.control.type_index,
        speedup_percent: end.control.speedup_percent,
        measured: Some(measurement(config, end)),
        discarded,
    }
}

fn unmatched_end(config: &CausalCollectConfig, end: &ExperimentEnd) -> Experiment {
    Experiment {
        experiment: end.control.experiment,
        type_index: end.control.type_index,
        speedup_percent: end.control.speedup_percent,
        measured: Some(measurement(config, end)),
        discarded: Some(Discard::EndWithoutStart),
    }
}

fn unmatched_start(start: &ExperimentStart) -> Experiment {
    Experiment {
        experiment: start.control.experiment,
        type_index: start.control.type_index,
        speedup_percent: start.control.speedup_percent,
        measured: None,
        discarded: Some(Discard::StartWithoutEnd),
    }
}

/// Why a paired experiment is unusable in every analysis, if it is.
fn check_end(config: &CausalCollectConfig, end: &ExperimentEnd) -> Option<Discard> {
    if end.control.type_index as usize >= config.types.len() {
        Some(Discard::TypeNotInTable)
    } else if end.flags & EXPERIMENT_CUT_SHORT != 0 {
        Some(Discard::CutShort)
    } else if end.delay_ns >= end.wall_ns {
        Some(Discard::NoEffectiveTime)
    } else if end.point_count as usize != config.points.len() {
        Some(Discard::PointCountMismatch)
    } else if end.control.speedup_percent > 0 && (end.delay_ns == 0 || end.type_samples == 0) {
        // A virtual speedup exists only as the delay inserted per sample of the type: with no
        // sample there is no delay and no measure of the type's time, so the speedup the
        // experiment applied is undefined (0/0), not its nominal value. It is discarded rather
        // than counted at 0%: the 0% experiments are the randomized baselines, and these are
        // selected by whether the type ran, which the program's phase decides; as baselines
        // they would carry that phase into every neighbour's program speedup. The type's
        // samples say it rather than the delay, which the arrivals' delays may make nonzero.
        Some(Discard::NoDelayInserted)
    } else {
        None
    }
}

fn measurement(config: &CausalCollectConfig, end: &ExperimentEnd) -> Measurement {
    let count = (end.point_count as usize).min(end.points.len());
    let arrivals = config
        .arrival
        .filter(|&i| i < count)
        .map_or(0, |i| end.points[i].visits);
    Measurement {
        cut_short: end.flags & EXPERIMENT_CUT_SHORT != 0,
        wall_ns: end.wall_ns,
        delay_ns: end.delay_ns,
        paused_ns: end.paused_ns,
        credited_ns: end.credited_ns,
        task_table_full: end.flags & EXPERIMENT_TASK_TABLE_FULL != 0,
        type_samples: end.type_samples,
        samples: end.samples,
        arrival_delay_ns: arrivals
            .saturating_mul(u64::from(end.control.arrival_delay_ns))
            .min(end.delay_ns),
        points: end.points[..count]
            .iter()
            .map(|p| PointCount {
                visits: p.visits,
                time_sum_ns: p.time_sum_ns,
                total: p.total,
            })
            .collect(),
        in_flight_delay: (config.in_flight_delays && config.latency.is_some())
            .then_some(end.in_flight_delay),
        capped_pauses: end.capped_pauses,
        max_owed_after_pause_ns: end.max_owed_after_pause_ns,
    }
}

/// The type table with data-profile ranks and what the experiments did with each type.
fn type_table(config: &CausalCollectConfig, experiments: &[Experiment]) -> Vec<CausalType> {
    let mut by_samples: Vec<usize> = (0..config.types.len())
        .filter(|&i| config.types[i].plan_samples > 0)
        .collect();
    by_samples.sort_by_key(|&i| (std::cmp::Reverse(config.types[i].plan_samples), i));
    config
        .types
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            let mine = experiments
                .iter()
                .filter(|e| e.type_index as usize == index);
            CausalType {
                index,
                unit: unit_of(spec.unit),
                name: spec.name.clone(),
                module: spec.module.clone(),
                functions: spec.functions.clone(),
                functions_left_out: spec.functions_left_out as usize,
                plan_samples: spec.plan_samples,
                data_profile_rank: by_samples.iter().position(|&i| i == index).map(|r| r + 1),
                selected: mine.clone().count(),
                experiment_samples: mine
                    .filter_map(|e| e.measured.as_ref())
                    .map(|m| m.type_samples)
                    .sum(),
            }
        })
        .collect()
}

/// The model's name for a table entry's unit.
fn unit_of(unit: dprof_format::CausalUnit) -> CausalUnit {
    match unit {
        dprof_format::CausalUnit::Type => CausalUnit::Type,
        dprof_format::CausalUnit::Function => CausalUnit::Function,
        dprof_format::CausalUnit::Module => CausalUnit::Module,
    }
}

/// The analyses the configuration asks for: each point's throughput, then the latency pair.
fn targets(config: &CausalCollectConfig) -> Vec<Target> {
    let mut targets: Vec<Target> = (0..config.points.len())
        .map(|point| Target::Throughput { point })
        .collect();
    if let Some((begin, end)) = config.latency {
        if begin < config.points.len() && end < config.points.len() {
            targets.push(Target::Latency { begin, end });
        }
    }
    targets
}

fn target_name(config: &CausalCollectConfig, target: Target) -> String {
    let label = |i: usize| {
        config
            .points
            .get(i)
            .map_or_else(String::new, ProgressPointSpec::label)
    };
    match target {
        Target::Throughput { point } => label(point),
        Target::Latency { begin, end } => format!("{} -> {}", label(begin), label(end)),
    }
}

/// One experiment's measure, as a ratio that pools by summing both parts (Coz's way of
/// combining experiments).
#[derive(Clone, Copy, Debug, Default)]
struct Ratio {
    /// Throughput: visits. Latency: in-flight integral in effective time (request x ns).
    numerator: f64,
    /// Throughput: effective duration (s). Latency: departures.
    denominator: f64,
}

impl Ratio {
    fn value(self) -> f64 {
        self.numerator / self.denominator
    }

    fn add(self, other: Self) -> Self {
        Self {
            numerator: self.numerator + other.numerator,
            denominator: self.denominator + other.denominator,
        }
    }
}

/// An experiment's measure for `target`, or why it has none.
fn measure(m: &Measurement, target: Target) -> Result<Ratio, Discard> {
    let effective_ns = m.effective_ns();
    if effective_ns <= 0 {
        return Err(Discard::NoEffectiveTime);
    }
    match target {
        Target::Throughput { point } => {
            let visits = m.points.get(point).map_or(0, |p| p.visits);
            if visits == 0 {
                return Err(Discard::ZeroVisits);
            }
            Ok(Ratio {
                numerator: visits as f64,
                denominator: effective_ns as f64 / 1e9,
            })
        }
        Target::Latency { begin, end } => {
            let departures = m.points.get(end).map_or(0, |p| p.visits);
            if departures == 0 {
                return Err(Discard::ZeroVisits);
            }
            let integral_wall = m
                .in_flight_integral_wall(begin, end)
                .ok_or(Discard::ZeroVisits)?;
            if integral_wall <= 0.0 {
                return Err(Discard::NoRequestsInFlight);
            }
            // Wall to effective time: the pauses are time the program would not have spent,
            // and each kept the requests then in flight in flight for its length.
            let integral_effective = match m.in_flight_delay {
                // The module's sum holds wrapped differences: a negative one is a count
                // that cannot be, as a negative integral is.
                Some(weighted) => integral_wall - weighted as i64 as f64,
                // Older profiles: as if requests were in flight as much during the pauses as
                // on average, which overstates the latency when the sped-up code is the
                // requests' own (pauses then fall while requests are in flight).
                None => integral_wall * effective_ns as f64 / m.wall_ns as f64,
            };
            if integral_effective <= 0.0 {
                return Err(Discard::NoRequestsInFlight);
            }
            Ok(Ratio {
                numerator: integral_effective,
                denominator: departures as f64,
            })
        }
    }
}

/// Program speedup of `value` against `baseline` (positive: faster).
fn program_speedup(target: Target, value: f64, baseline: f64) -> f64 {
    match target {
        Target::Throughput { .. } => value / baseline - 1.0,
        Target::Latency { .. } => baseline / value - 1.0,
    }
}

fn analyze_target(
    config: &CausalCollectConfig,
    types: &[CausalType],
    experiments: &[Experiment],
    target: Target,
) -> Analysis {
    let mut discarded = Vec::new();
    // Per type: (experiment, speedup, ratio) of the experiments this target can use.
    let mut usable: Vec<Vec<(&Experiment, Ratio)>> = vec![Vec::new(); types.len()];
    for e in experiments.iter().filter(|e| e.discarded.is_none()) {
        let (Some(m), Some(list)) = (&e.measured, usable.get_mut(e.type_index as usize)) else {
            continue;
        };
        match measure(m, target) {
            Ok(ratio) => list.push((e, ratio)),
            Err(reason) => discarded.push(Discarded {
                experiment: e.experiment,
                type_index: e.type_index,
                speedup_percent: e.speedup_percent,
                reason,
            }),
        }
    }
    // Every usable 0% experiment, whatever its type, in experiment order: the local
    // baselines.
    let mut baselines: Vec<(u32, Ratio)> = usable
        .iter()
        .flatten()
        .filter(|(e, _)| e.speedup_percent == 0)
        .map(|(e, ratio)| (e.experiment, *ratio))
        .collect();
    baselines.sort_by_key(|(number, _)| *number);
    let mut slopes: Vec<TypeSlope> = types
        .iter()
        .zip(&usable)
        .map(|(t, used)| {
            type_slope(
                t,
                used,
                &baselines,
                target,
                config.fixed_speedup_percent.is_some(),
                &mut discarded,
            )
        })
        .collect();
    slopes.sort_by(|a, b| match (a.fit.slope(), b.fit.slope()) {
        (Some(x), Some(y)) => y.slope.total_cmp(&x.slope),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => (
            a.data_profile_rank.is_none(),
            a.data_profile_rank,
            a.type_index,
        )
            .cmp(&(
                b.data_profile_rank.is_none(),
                b.data_profile_rank,
                b.type_index,
            )),
    });
    let mut rank = 0;
    for s in &mut slopes {
        if s.fit.slope().is_some() {
            rank += 1;
            s.rank = Some(rank);
        }
    }
    discarded.sort_by_key(|d| d.experiment);
    Analysis {
        target,
        name: target_name(config, target),
        types: slopes,
        discarded,
    }
}

/// One type's points and slope from the experiments `used` for `target`, each against its
/// local baseline from `baselines` (every type's 0% experiments, in order); experiments left
/// out for want of a baseline go to `discarded`. `fixed`: the session ran every sped-up
/// experiment at one speedup (`--fixed-speedup`), so the slope is [`fit_fixed`]'s.
fn type_slope(
    t: &CausalType,
    used: &[(&Experiment, Ratio)],
    baselines: &[(u32, Ratio)],
    target: Target,
    fixed: bool,
    discarded: &mut Vec<Discarded>,
) -> TypeSlope {
    let mut slope = TypeSlope {
        type_index: t.index,
        name: t.name.clone(),
        rank: None,
        data_profile_rank: t.data_profile_rank,
        plan_samples: t.plan_samples,
        experiments: 0,
        baseline_experiments: 0,
        baseline: None,
        speedups: Vec::new(),
        experiment_points: Vec::new(),
        fit: Fit::NoSlope {
            reason: NoSlope::NeverSelected,
            distinct_speedups: 0,
        },
    };
    let mut pooled: BTreeMap<u32, (usize, Ratio)> = BTreeMap::new();
    for (e, ratio) in used {
        let entry = pooled.entry(e.speedup_percent).or_default();
        entry.0 += 1;
        entry.1 = entry.1.add(*ratio);
    }
    let distinct_speedups = pooled.len();
    let Some(&(baseline_experiments, baseline_ratio)) = pooled.get(&0) else {
        let reason = if t.selected == 0 {
            NoSlope::NeverSelected
        } else if used.is_empty() {
            NoSlope::AllDiscarded
        } else {
            NoSlope::NoBaseline
        };
        for (e, _) in used {
            discarded.push(Discarded {
                experiment: e.experiment,
                type_index: e.type_index,
                speedup_percent: e.speedup_percent,
                reason: Discard::NoBaseline,
            });
        }
        slope.fit = Fit::NoSlope {
            reason,
            distinct_speedups,
        };
        return slope;
    };
    let baseline = baseline_ratio.value();
    slope.experiments = used.len();
    slope.baseline_experiments = baseline_experiments;
    slope.baseline = Some(baseline);
    slope.speedups = pooled
        .iter()
        .map(|(&speedup_percent, &(experiments, ratio))| SpeedupPoint {
            speedup_percent,
            experiments,
            value: ratio.value(),
            program_speedup: program_speedup(target, ratio.value(), baseline),
        })
        .collect();
    slope.experiment_points = used
        .iter()
        .map(|(e, ratio)| {
            let local = local_baseline(baselines, e.experiment).map_or(baseline, Ratio::value);
            ExperimentPoint {
                experiment: e.experiment,
                speedup_percent: e.speedup_percent,
                value: ratio.value(),
                program_speedup: program_speedup(target, ratio.value(), local),
            }
        })
        .collect();
    // The line goes through the sped-up experiments only: each against its own baseline,
    // they are independent points, and a constant cost of inserting delays at all (any
    // speedup against none) goes to the intercept instead of the slope. The 0% points stay
    // in `experiment_points` for plots.
    let sped_up: Vec<ExperimentPoint> = slope
        .experiment_points
        .iter()
        .filter(|p| p.speedup_percent > 0)
        .copied()
        .collect();
    slope.fit = if fixed {
        fit_fixed(&sped_up, distinct_speedups)
    } else {
        fit(&sped_up, distinct_speedups)
    };
    slope
}

/// An experiment's local baseline: the 0% experiments (of any type) just before and just
/// after experiment `number`, pooled, or the one on the side that has one; `None` when there
/// is no other 0% experiment. `baselines` is in experiment order.
///
/// The machine's speed drifts over a run (other load, a host's other guests; under QEMU,
/// whatever else the host runs) far more than a type's effect on it: a baseline pooled over
/// the whole run would add that drift to every experiment's program speedup. `dprof causal`
/// runs each sped-up experiment next to a 0% one, so its neighbours share its conditions,
/// and a neighbour on each side cancels a drift that goes one way. Their type does not
/// matter: a 0% experiment inserts no delay, and what the type costs the sampler (one O(1)
/// set lookup per sample) is the same for every type.
fn local_baseline(baselines: &[(u32, Ratio)], number: u32) -> Option<Ratio> {
    let after = baselines.partition_point(|(n, _)| *n <= number);
    let before = baselines[..after].iter().rev().find(|(n, _)| *n != number);
    [before, baselines.get(after)]
        .into_iter()
        .flatten()
        .map(|(_, ratio)| *ratio)
        .reduce(Ratio::add)
}

/// The slope of `points` with its interval, or why there is none.
fn fit(points: &[ExperimentPoint], distinct_speedups: usize) -> Fit {
    let too_few = Fit::NoSlope {
        reason: NoSlope::TooFewSpeedups,
        distinct_speedups,
    };
    if distinct_speedups < MIN_DISTINCT_SPEEDUPS {
        return too_few;
    }
    let xy: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (f64::from(p.speedup_percent) / 100.0, p.program_speedup))
        .collect();
    // `None` cannot happen with 3 distinct speedups; say so rather than make a slope up.
    let Some(line) = LineFit::of(&xy) else {
        return too_few;
    };
    with_interval(
        line.slope,
        line.intercept,
        line.slope_std_error,
        line.degrees_of_freedom(),
        line.points,
        distinct_speedups,
    )
}

/// A fitted slope with its [`CONFIDENCE`] interval (Student's t over `degrees_of_freedom`)
/// and the flags the interval gives: the one place both fits turn an estimate into a
/// [`Slope`].
fn with_interval(
    slope: f64,
    intercept: f64,
    std_error: f64,
    degrees_of_freedom: f64,
    points: usize,
    distinct_speedups: usize,
) -> Fit {
    let t_critical = student_t_quantile(0.5 + CONFIDENCE / 2.0, degrees_of_freedom);
    let half = t_critical * std_error;
    let (low, high) = (slope - half, slope + half);
    Fit::Slope(Slope {
        slope,
        intercept,
        low,
        high,
        std_error,
        t_critical,
        points,
        distinct_speedups,
        hurts: high < 0.0,
        within_noise: low <= 0.0 && high >= 0.0,
    })
}

/// The slope of `points` taken at one virtual speedup (`--fixed-speedup`): their mean
/// program speedup over that speedup, a line through the origin (each point is against its
/// own 0% baselines, so 0% gives 0 by construction), with the mean's t interval over
/// `points - 1` degrees of freedom. Nothing tests that the effect is linear in the speedup;
/// the view says so.
fn fit_fixed(points: &[ExperimentPoint], distinct_speedups: usize) -> Fit {
    let too_few = Fit::NoSlope {
        reason: NoSlope::TooFewExperiments,
        distinct_speedups,
    };
    let Some(speedup) = points.first().map(|p| p.speedup_percent) else {
        return too_few;
    };
    if points.iter().any(|p| p.speedup_percent != speedup) {
        // Not a fixed-speedup session after all: the line over its speedups.
        return fit(points, distinct_speedups);
    }
    let values: Vec<f64> = points.iter().map(|p| p.program_speedup).collect();
    let Some(mean) = MeanFit::of(&values) else {
        return too_few;
    };
    let x = f64::from(speedup) / 100.0;
    with_interval(
        mean.mean / x,
        0.0,
        mean.std_error / x,
        mean.degrees_of_freedom(),
        mean.points,
        distinct_speedups,
    )
}

/// What the view could not see, one sentence each.
fn unseen(report: &CausalReport) -> Vec<String> {
    let mut lines = Vec::new();
    let never: Vec<String> = report
        .types
        .iter()
        .filter(|t| t.selected == 0)
        .map(CausalType::label)
        .collect();
    if !never.is_empty() {
        lines.push(format!(
            "{} of {} {} were never selected by an experiment, so nothing is known of their \
             effect: {} (run the session for longer)",
            never.len(),
            report.types.len(),
            report.units_plural(),
            never.join(", ")
        ));
    }
    let unsampled: Vec<String> = report
        .types
        .iter()
        .filter(|t| t.selected > 0 && t.experiment_samples == 0)
        .map(CausalType::label)
        .collect();
    if !unsampled.is_empty() {
        let what = match report.unit() {
            Some(CausalUnit::Type) => "the accesses of",
            _ => "the instructions of",
        };
        lines.push(format!(
            "no sample fell on {what} {} during their experiments, so no delay was inserted \
             and their sped-up experiments are discarded",
            unsampled.join(", ")
        ));
    }
    for t in report.types.iter().filter(|t| t.functions_left_out > 0) {
        lines.push(format!(
            "{} was sped up in its {} most sampled functions only: {} more of its functions in \
             scope did not fit in the {} instructions one entry takes",
            t.label(),
            t.functions.len(),
            t.functions_left_out,
            dprof_abi::MAX_CAUSAL_TYPE_IPS
        ));
    }
    let out = report.discarded_experiments();
    if out > 0 {
        lines.push(format!(
            "{out} of {} experiments could not be used at all (see the reasons above)",
            report.experiments.len()
        ));
    }
    for analysis in &report.analyses {
        if !analysis.discarded.is_empty() {
            let n = analysis.discarded.len();
            lines.push(format!(
                "{n} more experiment{} could not be used for {} (see the reasons above)",
                if n == 1 { "" } else { "s" },
                analysis.name
            ));
        }
    }
    lines
}

/// Why `report` ranks no type, in the words every front end shows; `None` when a type has a
/// slope.
fn why_empty(report: &CausalReport) -> Option<EmptyCausal> {
    let has_slope = |a: &Analysis| a.types.iter().any(|t| t.fit.slope().is_some());
    if report.analyses.iter().any(has_slope) {
        return None;
    }
    let used = report
        .analyses
        .iter()
        .flat_map(|a| &a.types)
        .any(|t| !t.experiment_points.is_empty());
    if !used {
        let mut groups = report.discard_groups();
        groups.sort_by_key(|g| std::cmp::Reverse(g.experiments.len()));
        let counts: Vec<String> = groups
            .iter()
            .map(|g| {
                let whose = g
                    .analysis
                    .as_ref()
                    .map_or_else(String::new, |a| format!(" for {a}"));
                format!("{} {}{whose}", g.experiments.len(), g.reason.describe())
            })
            .collect();
        let remedy = groups.first().map_or_else(
            || "run the session for longer".to_owned(),
            |g| discard_remedy(g.reason, report.units_plural()),
        );
        return Some(EmptyCausal {
            reason: EmptyCausalReason::NoUsableExperiment,
            message: format!(
                "none of the {} experiments could be used ({}), so there is nothing to rank or \
                 plot: {remedy}",
                report.experiments.len(),
                counts.join(", ")
            ),
        });
    }
    let why: Vec<String> = report
        .analyses
        .iter()
        .flat_map(|a| {
            // Types never selected are in `unseen`; the ones tried say what they lacked.
            a.types.iter().filter_map(move |t| match t.fit {
                Fit::NoSlope {
                    reason,
                    distinct_speedups,
                } if reason != NoSlope::NeverSelected => Some(format!(
                    "{} for {}: {}",
                    report.label_of(t.type_index),
                    a.name,
                    reason.describe(distinct_speedups)
                )),
                Fit::NoSlope { .. } | Fit::Slope(_) => None,
            })
        })
        .collect();
    let needs = if report.fixed_speedup_percent.is_some() {
        "2 sped-up experiments at the fixed speedup".to_owned()
    } else {
        format!("{MIN_DISTINCT_SPEEDUPS} distinct virtual speedups")
    };
    let longer = match report.end_to_end_runs {
        Some(runs) => format!("give --end-to-end more runs than {runs}"),
        None => "run the session for longer".to_owned(),
    };
    Some(EmptyCausal {
        reason: EmptyCausalReason::NoSlope,
        message: format!(
            "no {} has a slope ({}), so there is nothing to rank: a slope needs a 0% \
             baseline and {needs} ({longer})",
            report.unit_word(),
            why.join("; ")
        ),
    })
}

/// What would avoid discarding experiments for `reason`, in a few words; `units` names the
/// table's entries (`types`, `functions`, ...).
fn discard_remedy(reason: Discard, units: &str) -> String {
    match reason {
        Discard::NoDelayInserted => format!(
            "no sample fell on the {units}' instructions during their experiments; speed up \
             {units} the workload {} while it runs, or sample more often (--period)",
            if units == "types" {
                "touches"
            } else {
                "executes"
            }
        ),
        Discard::ZeroVisits | Discard::NoRequestsInFlight => {
            "the workload did not reach the progress point during the experiments; check that \
             it runs the point's code, or lengthen the experiments (--experiment)"
                .to_owned()
        }
        _ => "run the session for longer".to_owned(),
    }
}
