//! `dprof-qemu-check selftest-causal DIR`: the `causal` workload of `dprof_selftest.ko`
//! (`kmod/selftest/causal.rs`), whose critical path is known by construction: a chain on
//! CPU 0 accesses `dprof_selftest_causal_x` for about a fifth of each round, a worker on
//! CPU 1 accesses `dprof_selftest_causal_y` for about three fifths of it and then waits for
//! the round's end.
//!
//! The plain data profile counts samples by time, so it must rank Y above X: Y's samples at
//! least [`MIN_Y_OVER_X`] times X's. Each type's samples come from its own access function.
//! The workload counted its rounds (`causal_rounds` in debugfs).
//!
//! Then `dprof causal`:
//!
//! - **Counts**: in the count run, the kprobe on `dprof_selftest_causal_round` counted exactly
//!   the rounds the workload counted while the experiments ran, and the user point exactly
//!   the 50 signals the scenario sent (the last experiment, cut short by the stop, carries the
//!   session's totals).
//! - **Ranking**: in the ranking run (4 minutes of workload, 200 ms experiments, a sample
//!   every 1 ms: about 500 experiments per type, half of them at 0%), the same profile's
//!   profiling phase ranks Y above X by samples, and `dprof report --view causal --json`
//!   gives both a slope from at least [`MIN_EXPERIMENTS_PER_TYPE`] experiments, ranks X
//!   above Y, X's 95% interval lies above [`MIN_X_SLOPE_LOW`], and Y is within noise of zero:
//!   its interval holds 0, or its slope is within [`MAX_Y_SLOPE`] of it.
//! - **Delay**: over the sped-up experiments, the pauses served plus the idle credits match
//!   the global delay count times the other CPUs (Coz's rule) within [`DELAY_TOLERANCE`].
//! - **Overhead**: the 0% experiments' rounds per effective second are between
//!   [`MIN_BASELINE_SHARE`] and [`MAX_BASELINE_SHARE`] of the uninstrumented rate measured
//!   in the same boot, before the profiles and after the ranking run.
//! - **Zero visits**: with a progress point nobody signals, every experiment that is usable
//!   at all is discarded for zero visits and no type gets a slope.
//! - **Functions** (`--units functions --scope 'dprof_selftest_causal_*' --top 2`): the table
//!   holds the two most sampled functions of the workload, the chain's computation and the
//!   worker's Y accesses, each with every one of its instructions (at least
//!   [`MIN_FUNCTION_IPS`]); at least [`MIN_DELAYED_SHARE`] of each one's sped-up experiments
//!   inserted delay; the causal view ranks functions and names them; and the computation,
//!   on the critical path, ranks above the Y accesses. Only the order is checked: from 60
//!   experiments each the intervals are wide on a loaded host (measured, two runs: the
//!   computation +1.18 [+0.69, +1.66] and +0.34 [-0.17, +0.86], the Y accesses -0.20
//!   [-0.59, +0.18] and -0.08 [-0.27, +0.11]). Its slope can exceed 1: speeding up two
//!   thirds of the chain's round by s shortens it by up to 1 / (1 - 2s/3).
//! - **Callers in scope** (`--scope CHAIN,WORKER --functions CHAIN,WORKER --fixed-speedup
//!   25`, CHAIN and WORKER the chain's and the worker's round functions, whose time is in
//!   the functions they call): the profile says the module counted samples outside the
//!   scope for their callers; the delay each one's sped-up experiments inserted, over 25% of
//!   their wall time, is at least [`MIN_CHAIN_SHARE`] for the chain's round (the chain's CPU
//!   is nearly always in it or its callees) and [`MIN_WORKER_SHARE`] for the worker's (about
//!   60% of its CPU), where their own instructions alone get a few percent of the samples;
//!   and the chain's round, on the critical path, has its interval above 0 and its slope
//!   above the worker's (measured +1.30 [+1.24, +1.35], where speeding the whole round up
//!   by 25% predicts 1 / 0.75 - 1 = 0.33 over 0.25 = +1.33; the worker's -0.09).
//! - **Sampled point** (`--progress sampled:dprof_selftest_causal_compute`, the round's
//!   kprobe beside it, 30 s of workload): at least [`MIN_SAMPLED_SHARE`] of the experiments
//!   that ran to their end counted samples in the computation, no more than the samples
//!   the sampler took in them (a visit is a sample), and the causal view says the point is
//!   sampled. The slopes are reported, not checked: 30 s give some 55 experiments per
//!   type, too few for a ranking even by the kprobe in the same run (measured: X -0.19
//!   [-0.58, +0.21], Y +0.09 [-0.23, +0.40] by the sampled point, about 60 samples per
//!   experiment under TCG; X +0.13 [-0.16, +0.43], Y +0.08 [-0.16, +0.31] by the kprobe).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use dprof_abi::Record;
use dprof_format::Profile;
use serde_json::Value;

use super::json_report::{
    causal_view_json, find_type, guest_vmlinux, percent, report_json, type_samples_in,
};

/// X's 95% interval should lie above this. By construction X takes about a fifth of the
/// chain's round (the workload's summary line measures it), so its slope is near 0.2.
const MIN_X_SLOPE_LOW: f64 = 0.05;
/// Y is within noise of zero when its 95% interval holds 0, or its slope is no further than
/// this from 0: a third of X's smallest measured slope. The intervals are about +-0.02 to
/// +-0.04 wide, and Y's slope was measured at -0.043 to -0.007 over 6 runs: pausing the
/// chain's CPU costs it up to 2% more than the pause (its rate fell by 0.997 to 1.017 times
/// the pause fraction in three runs), an effect too small to report as a speedup and that
/// must not fail the test.
const MAX_Y_SLOPE: f64 = 0.07;
/// Experiments each of X and Y needs (about half of them at 0%).
const MIN_EXPERIMENTS_PER_TYPE: u64 = 100;
/// Pauses plus credits against the delay the other CPUs were asked to serve.
const DELAY_TOLERANCE: f64 = 0.25;
/// The 0% experiments' rate against the uninstrumented rate (the slower of the two runs):
/// the ranking run samples every 1 ms, and the profiler must cost the workload little.
/// Measured: 96-100% on a quiet host; 56% with two compilers sharing the host's two cores
/// during the ranking run but not during the uninstrumented one.
const MIN_BASELINE_SHARE: f64 = 0.5;
/// ... and a profiler cannot make the workload faster (against the faster run). A 0% rate
/// well above the uninstrumented one means visits and time were not measured over the same
/// window (as when the module read the visits after the grace period that ends an
/// experiment: 117-142%).
const MAX_BASELINE_SHARE: f64 = 1.2;
/// The chain's computation: about four fifths of CPU 0's round, on the critical path.
const COMPUTE: &str = "dprof_selftest_causal_compute";
/// The worker's Y accesses: about three fifths of CPU 1's round, off the critical path.
const Y_TOUCH: &str = "dprof_selftest_causal_y_touch";
/// Instructions of each: 64 repetitions of two instructions, each followed by a jump.
const MIN_FUNCTION_IPS: u32 = 256;
/// Share of a function's sped-up experiments (not cut short) that must have inserted delay:
/// a sample every 1 ms lands on each function a hundred times in a 200 ms experiment.
const MIN_DELAYED_SHARE: f64 = 0.9;
/// The callers run: delay inserted over speedup x wall time, for the chain's round and for
/// the worker's. Measured 0.99 and 0.60; their own instructions had 13% and 11% of their
/// CPU's samples in the profiling phase, which is what they would get without the callers.
const MIN_CHAIN_SHARE: f64 = 0.7;
const MIN_WORKER_SHARE: f64 = 0.35;
pub(crate) const X: &str = "dprof_selftest_causal_x";
pub(crate) const Y: &str = "dprof_selftest_causal_y";
const ROUND_POINT: &str = "kprobe:dprof_selftest_causal_round";
/// The sampled progress point of the sampled run.
const SAMPLED_POINT: &str = "sampled:dprof_selftest_causal_compute";
/// Share of the sampled run's complete experiments that must count samples in the
/// computation: at a sample per ms and most of CPU 0's time there, a 200 ms experiment
/// takes about a hundred.
const MIN_SAMPLED_SHARE: f64 = 0.9;

/// Y's samples over X's in the data profile: by construction Y's time over X's, about 2.5 to
/// 3 (the workload's summary line gives both times, and the check prints their ratio beside
/// the samples'); 1.5 leaves room for the host's load on the guest's two CPUs.
const MIN_Y_OVER_X: f64 = 1.5;
/// Share of a type's samples that must come from its access function.
const MIN_OWN_FUNCTION_PERCENT: f64 = 90.0;
/// Samples X needs for the comparison to mean anything.
const MIN_SAMPLES: u64 = 100;

pub(crate) fn check(dir: &Path) -> Result<String> {
    let mut report = String::new();
    let mut failures = Vec::new();
    let rounds_text = std::fs::read_to_string(dir.join("causal-data.rounds"))
        .context("reading causal-data.rounds")?;
    let rounds: u64 = rounds_text
        .trim()
        .parse()
        .with_context(|| format!("causal_rounds read {rounds_text:?}, not a number"))?;
    writeln!(report, "rounds: {rounds}")?;
    if rounds == 0 {
        failures.push("the workload counted no round".to_string());
    }
    let mut time_ratio = None;
    if let Ok(summary) = std::fs::read_to_string(dir.join("causal-data.summary")) {
        writeln!(report, "workload: {}", summary.trim())?;
        time_ratio = y_over_x_time(&summary);
    }

    // Type names come from the caches; field names from the DWARF of the guest kernel and of
    // dprof_selftest.ko.
    let vmlinux = guest_vmlinux()?;
    let json = report_json(
        &dir.join("causal-data.dprof"),
        &["--vmlinux", &vmlinux, "--debug-dir", &dir.to_string_lossy()],
    )?;
    let mut samples = [0u64; 2];
    for (i, (type_name, function)) in [
        ("dprof_selftest_causal_x", "dprof_selftest_causal_x_touch"),
        ("dprof_selftest_causal_y", "dprof_selftest_causal_y_touch"),
    ]
    .into_iter()
    .enumerate()
    {
        let ty = find_type(&json, type_name)?;
        let total = ty["samples"].as_u64().unwrap_or(0);
        let own = type_samples_in(ty, function);
        let pct = percent(own, total);
        writeln!(
            report,
            "{type_name}: {total} samples, {own} in {function} ({pct:.1}%)"
        )?;
        if pct < MIN_OWN_FUNCTION_PERCENT {
            failures.push(format!(
                "{pct:.1}% of {type_name}'s samples are in {function}, want >= {MIN_OWN_FUNCTION_PERCENT}%"
            ));
        }
        samples[i] = total;
    }
    let [x, y] = samples;
    let ratio = y as f64 / x.max(1) as f64;
    match time_ratio {
        Some(times) => writeln!(
            report,
            "Y / X samples: {ratio:.2} (the workload's own Y / X time: {times:.2})"
        )?,
        None => writeln!(report, "Y / X samples: {ratio:.2}")?,
    }
    if x < MIN_SAMPLES {
        failures.push(format!("only {x} samples of dprof_selftest_causal_x"));
    }
    if ratio < MIN_Y_OVER_X {
        failures.push(format!(
            "the data profile does not rank Y well above X: {y} / {x} samples = {ratio:.2}, want >= {MIN_Y_OVER_X}"
        ));
    }
    // The workload alone, before the profiles and after the ranking run: the host's load
    // may change between them.
    let mut uninstrumented_rates = [0.0; 2];
    for (rate, (file, when)) in uninstrumented_rates.iter_mut().zip([
        ("uninstrumented.rounds", "before"),
        ("uninstrumented-after.rounds", "after"),
    ]) {
        let [rounds, ns] = read_numbers(&dir.join(file), 2)?[..] else {
            bail!("{file} does not hold two numbers");
        };
        *rate = rounds as f64 / (ns as f64 / 1e9);
        writeln!(
            report,
            "uninstrumented ({when}): {rounds} rounds in {:.2} s = {rate:.0} rounds/s",
            ns as f64 / 1e9
        )?;
    }
    check_counts(dir, &mut report, &mut failures)?;
    check_ranking(dir, uninstrumented_rates, &mut report, &mut failures)?;
    check_no_visits(dir, &mut report, &mut failures)?;
    check_functions(dir, &mut report, &mut failures)?;
    check_callers(dir, &mut report, &mut failures)?;
    check_sampled(dir, &mut report, &mut failures)?;

    if failures.is_empty() {
        writeln!(report, "selftest-causal: all checks passed")?;
        Ok(report)
    } else {
        bail!("{report}\nFAILED:\n  {}", failures.join("\n  "))
    }
}

/// The worker's time on Y over the chain's time on X, per round, from the workload's summary
/// line (`... chain X 94 us, compute 313 us, ...; worker Y 234 us, ...`).
fn y_over_x_time(summary: &str) -> Option<f64> {
    let x = number_after(summary, "chain X ")?;
    let y = number_after(summary, "worker Y ")?;
    (x > 0.0).then(|| y / x)
}

/// The index of the type `name` in a causal view's type table.
pub(crate) fn causal_type_index(view: &Value, name: &str) -> Result<u64> {
    view["types"]
        .as_array()
        .and_then(|types| types.iter().position(|t| t["name"] == name))
        .map(|i| i as u64)
        .with_context(|| format!("{name} is not in the causal type table"))
}

/// The whole number right after the first `key` in a workload's summary line.
pub(crate) fn number_after(summary: &str, key: &str) -> Option<f64> {
    let rest = &summary[summary.find(key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Runs the end-to-end scenario asked for (`--end-to-end 100`).
const END_TO_END_RUNS: u64 = 100;

/// `dprof-qemu-check causal-end-to-end DIR`: the causal view of `--end-to-end 100
/// --fixed-speedup 100` over the workload run for a fixed number of rounds (`e2e.json`,
/// written in the guest). Every run is one experiment visited once, at its end; none is
/// discarded; and X, on the critical path (shaped to be nearly half the chain's round), ranks
/// above Y, off it, with a positive slope and its whole interval above Y's slope. With 80 runs
/// X came to +0.34 [+0.19, +0.49] and +0.36 [+0.20, +0.52], Y to +0.04 and -0.12 (pausing the
/// chain's CPU costs it a little more than the pause, as in selftest-causal): the two move
/// together between boots, so X is compared with Y rather than with zero.
pub(crate) fn check_end_to_end(dir: &Path) -> Result<String> {
    let mut report = String::new();
    let mut failures = Vec::new();
    if let Ok(summary) = std::fs::read_to_string(dir.join("e2e.summary")) {
        writeln!(report, "last run: {}", summary.trim())?;
    }
    let text = std::fs::read_to_string(dir.join("e2e.json")).context("reading e2e.json")?;
    let view: Value = serde_json::from_str(&text).context("e2e.json is not JSON")?;
    if view["end_to_end_runs"].as_u64() != Some(END_TO_END_RUNS) {
        failures.push(format!(
            "end_to_end_runs is {}, want {END_TO_END_RUNS}",
            view["end_to_end_runs"]
        ));
    }
    let experiments = view["experiments"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let once = experiments
        .iter()
        .filter(|e| e["measured"]["points"][0]["visits"].as_u64() == Some(1))
        .count();
    let discarded: Vec<&Value> = experiments
        .iter()
        .filter(|e| !e["discarded"].is_null())
        .collect();
    writeln!(
        report,
        "experiments: {}, {once} visited exactly once, {} discarded",
        experiments.len(),
        discarded.len()
    )?;
    if experiments.len() as u64 != END_TO_END_RUNS || once != experiments.len() {
        failures.push(format!(
            "{} experiments, {once} of them visited exactly once: want {END_TO_END_RUNS}, each \
             once",
            experiments.len()
        ));
    }
    if let Some(first) = discarded.first() {
        failures.push(format!(
            "{} experiments discarded, the first for {}",
            discarded.len(),
            first["discarded"]
        ));
    }
    let analysis = &view["analyses"][0];
    let (x, y) = (causal_entry(analysis, X)?, causal_entry(analysis, Y)?);
    writeln!(report, "end-to-end X: {}", describe_fit(x))?;
    writeln!(report, "end-to-end Y: {}", describe_fit(y))?;
    if x["rank"].as_u64() != Some(1) || y["rank"].as_u64() != Some(2) {
        failures.push("the end-to-end ranking does not put X first and Y second".to_owned());
    }
    let slope = |e: &Value, k: &str| e["fit"][k].as_f64().unwrap_or(f64::NAN);
    let (x_slope, x_low, y_slope) = (slope(x, "slope"), slope(x, "low"), slope(y, "slope"));
    // Written so that a missing value (NaN) fails too.
    if !(x_slope > 0.0 && x_low > y_slope) {
        failures.push(format!(
            "X's slope {x_slope:+.3} is not positive with its interval, from {x_low:+.3}, above \
             Y's slope {y_slope:+.3}"
        ));
    }
    if failures.is_empty() {
        writeln!(report, "causal-end-to-end: all checks passed")?;
        Ok(report)
    } else {
        bail!(
            "{report}
FAILED:
  {}",
            failures.join(
                "
  "
            )
        )
    }
}

/// `count` whitespace-separated numbers from a file the scenario wrote.
fn read_numbers(path: &Path, count: usize) -> Result<Vec<u64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let numbers = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u64>, _>>()
        .with_context(|| format!("{}: {text:?} is not {count} numbers", path.display()))?;
    ensure!(
        numbers.len() == count,
        "{}: {text:?} is not {count} numbers",
        path.display()
    );
    Ok(numbers)
}

/// What a causal profile says of its experiments, read in one pass.
struct Experiments {
    /// CPUs online when it was collected.
    online_cpus: u32,
    config: dprof_format::CausalCollectConfig,
    /// Start records with their times.
    starts: Vec<(u64, dprof_abi::ExperimentStart)>,
    ends: Vec<dprof_abi::ExperimentEnd>,
}

/// The experiment records of a profile, and its causal configuration.
fn experiments(path: &Path) -> Result<Experiments> {
    let profile = Profile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let config = profile
        .header()
        .config
        .causal
        .clone()
        .with_context(|| format!("{} has no causal configuration", path.display()))?;
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for item in profile.records() {
        match item? {
            (h, Record::ExperimentStart(s)) => starts.push((h.time_ns, s)),
            (_, Record::ExperimentEnd(e)) => ends.push(e),
            _ => {}
        }
    }
    Ok(Experiments {
        online_cpus: profile.header().online_cpus,
        config,
        starts,
        ends,
    })
}

fn point_index(config: &dprof_format::CausalCollectConfig, label: &str) -> Result<usize> {
    config
        .points
        .iter()
        .position(|p| p.label() == label)
        .with_context(|| format!("no progress point {label} in the profile"))
}

/// The kprobe's and the user point's totals against the workload's and the scenario's counts.
fn check_counts(dir: &Path, report: &mut String, failures: &mut Vec<String>) -> Result<()> {
    let counts = read_numbers(&dir.join("counts.rounds"), 4)?;
    let (r0, r1, t0, signals) = (counts[0], counts[1], counts[2], counts[3]);
    let Experiments {
        config,
        starts,
        ends,
        ..
    } = experiments(&dir.join("counts.dprof"))?;
    let kprobe = point_index(&config, ROUND_POINT)?;
    let user = point_index(&config, "user:tick")?;
    let first_start = starts.iter().map(|(t, _)| *t).min();
    let last = ends.iter().max_by_key(|e| e.points[kprobe].total);
    let (Some(first_start), Some(last)) = (first_start, last) else {
        failures.push("the count run has no experiments".to_string());
        return Ok(());
    };
    writeln!(
        report,
        "counts: {} experiments; kprobe total {} vs {} rounds counted by the workload; user total \
         {} vs {signals} signals",
        ends.len(),
        last.points[kprobe].total,
        r1 - r0,
        last.points[user].total
    )?;
    if first_start > t0 {
        failures.push(format!(
            "the count run's experiments began {} ms after the second workload: the counts \
             cannot be compared (lengthen the pause in the scenario)",
            (first_start - t0) / 1_000_000
        ));
    } else if last.points[kprobe].total != r1 - r0 {
        failures.push(format!(
            "the kprobe counted {} visits of dprof_selftest_causal_round, the workload {} rounds",
            last.points[kprobe].total,
            r1 - r0
        ));
    }
    if last.points[user].total != signals {
        failures.push(format!(
            "the user point counted {} visits, the scenario signalled {signals}",
            last.points[user].total
        ));
    }
    Ok(())
}

/// The causal view's analysis of the progress point `point` (its label).
fn analysis_of<'a>(view: &'a Value, point: &str) -> Result<&'a Value> {
    view["analyses"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == point))
        .with_context(|| format!("the causal view has no analysis of {point}"))
}

/// One type's entry of the causal view's first analysis.
pub(crate) fn causal_entry<'a>(analysis: &'a Value, name: &str) -> Result<&'a Value> {
    analysis["types"]
        .as_array()
        .and_then(|types| types.iter().find(|t| t["name"] == name))
        .with_context(|| format!("{name} is not in the causal view"))
}

/// `slope [low, high], N experiments` of an entry, for the report.
pub(crate) fn describe_fit(entry: &Value) -> String {
    let fit = &entry["fit"];
    format!(
        "rank {}, slope {:+.3} [{:+.3}, {:+.3}], {} experiments ({} at 0%), data-profile rank {}",
        entry["rank"],
        fit["slope"].as_f64().unwrap_or(f64::NAN),
        fit["low"].as_f64().unwrap_or(f64::NAN),
        fit["high"].as_f64().unwrap_or(f64::NAN),
        entry["experiments"],
        entry["baseline_experiments"],
        entry["data_profile_rank"],
    )
}

#[expect(
    clippy::too_many_lines,
    reason = "one check after the other, each commented"
)]
fn check_ranking(
    dir: &Path,
    uninstrumented_rates: [f64; 2],
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let path = dir.join("causal.dprof");
    if let Ok(summary) = std::fs::read_to_string(dir.join("causal.summary")) {
        writeln!(report, "ranking run workload: {}", summary.trim())?;
    }
    let view = report_json(&path, &["--view", "causal"])?;
    let analysis = analysis_of(&view, ROUND_POINT)?;
    let (x, y) = (causal_entry(analysis, X)?, causal_entry(analysis, Y)?);
    writeln!(report, "causal X: {}", describe_fit(x))?;
    writeln!(report, "causal Y: {}", describe_fit(y))?;
    for (name, entry) in [(X, x), (Y, y)] {
        if entry["fit"]["kind"] != "slope" {
            failures.push(format!("{name} has no slope: {}", entry["fit"]));
            return Ok(());
        }
        let n = entry["experiments"].as_u64().unwrap_or(0);
        if n < MIN_EXPERIMENTS_PER_TYPE {
            failures.push(format!(
                "{name}: {n} experiments, want >= {MIN_EXPERIMENTS_PER_TYPE}"
            ));
        }
    }
    let f = |e: &Value, k: &str| e["fit"][k].as_f64().unwrap_or(f64::NAN);
    if x["rank"].as_u64() >= y["rank"].as_u64() {
        failures.push("the causal ranking does not put X above Y".to_string());
    }
    if f(x, "low").is_nan() || f(x, "low") <= MIN_X_SLOPE_LOW {
        failures.push(format!(
            "X's slope is not clearly positive: interval [{:+.3}, {:+.3}], want its low end > {MIN_X_SLOPE_LOW}",
            f(x, "low"),
            f(x, "high")
        ));
    }
    let y_holds_zero = f(y, "low") <= 0.0 && f(y, "high") >= 0.0;
    if !y_holds_zero && f(y, "slope").abs() > MAX_Y_SLOPE {
        failures.push(format!(
            "Y's slope {:+.3} [{:+.3}, {:+.3}] is not within noise of zero: its interval \
             misses 0 and it is further than {MAX_Y_SLOPE} from it",
            f(y, "slope"),
            f(y, "low"),
            f(y, "high"),
        ));
    }
    // The same run's profiling phase: the data profile must rank Y above X.
    let data = report_json(&path, &[])?;
    let rank = |name| -> Result<u64> {
        find_type(&data, name)?["rank"]
            .as_u64()
            .with_context(|| format!("{name} has no rank"))
    };
    let (x_rank, y_rank) = (rank(X)?, rank(Y)?);
    writeln!(
        report,
        "ranking run's profiling phase: data-profile rank X {x_rank}, Y {y_rank}"
    )?;
    if y_rank >= x_rank {
        failures.push("the ranking run's data profile does not rank Y above X".to_string());
    }

    // Coz's rule: the other CPUs serve the delay each experiment inserts.
    let Experiments {
        online_cpus,
        config,
        ends,
        ..
    } = experiments(&path)?;
    let cpus = online_cpus.max(1);
    let sped_up: Vec<_> = ends
        .iter()
        .filter(|e| e.control.speedup_percent > 0 && e.flags == 0)
        .collect();
    let asked: u64 = sped_up.iter().map(|e| e.delay_ns).sum::<u64>() * u64::from(cpus - 1);
    let served: u64 = sped_up.iter().map(|e| e.paused_ns + e.credited_ns).sum();
    let served_ratio = served as f64 / asked.max(1) as f64;
    writeln!(
        report,
        "delay: {} sped-up experiments, {:.3} s asked of the other CPUs, {:.3} s served \
         ({:.3} paused, {:.3} credited): ratio {served_ratio:.3}",
        sped_up.len(),
        asked as f64 / 1e9,
        served as f64 / 1e9,
        sped_up.iter().map(|e| e.paused_ns).sum::<u64>() as f64 / 1e9,
        sped_up.iter().map(|e| e.credited_ns).sum::<u64>() as f64 / 1e9,
    )?;
    if asked == 0 || (served_ratio - 1.0).abs() > DELAY_TOLERANCE {
        failures.push(format!(
            "pauses and credits {served_ratio:.3} of the delay asked, want within {DELAY_TOLERANCE} of 1"
        ));
    }

    // Overhead at 0%: rounds per effective second of the 0% experiments.
    let kprobe = point_index(&config, ROUND_POINT)?;
    let baseline: Vec<_> = ends
        .iter()
        .filter(|e| e.control.speedup_percent == 0 && e.flags == 0)
        .collect();
    let visits: u64 = baseline.iter().map(|e| e.points[kprobe].visits).sum();
    let seconds: f64 = baseline
        .iter()
        .map(|e| e.wall_ns.saturating_sub(e.delay_ns) as f64 / 1e9)
        .sum();
    let rate = visits as f64 / seconds.max(1e-9);
    // Against the slower uninstrumented run for the lower bound, the faster for the upper.
    let [before, after] = uninstrumented_rates;
    let (slower, faster) = (before.min(after), before.max(after));
    writeln!(
        report,
        "overhead: 0% experiments {rate:.0} rounds/s ({} experiments, {seconds:.1} s) = \
         {:.0}% to {:.0}% of the uninstrumented rates",
        baseline.len(),
        100.0 * rate / faster,
        100.0 * rate / slower
    )?;
    if rate < MIN_BASELINE_SHARE * slower || rate > MAX_BASELINE_SHARE * faster {
        failures.push(format!(
            "at 0% the workload ran at {rate:.0} rounds/s, want {:.0}% of the slower \
             uninstrumented rate ({slower:.0}) to {:.0}% of the faster ({faster:.0})",
            100.0 * MIN_BASELINE_SHARE,
            100.0 * MAX_BASELINE_SHARE
        ));
    }
    Ok(())
}

/// A point nobody signals: every experiment discarded for zero visits, no slope.
fn check_no_visits(dir: &Path, report: &mut String, failures: &mut Vec<String>) -> Result<()> {
    let path = dir.join("novisits.dprof");
    let (view, ranked_nothing) = causal_view_json(&path)?;
    if !ranked_nothing || view["why_empty"].is_null() {
        failures.push(
            "the zero-visit run's causal view did not say, with exit status 3 and why_empty, \
             that it ranks nothing"
                .to_string(),
        );
    }
    let analysis = &view["analyses"][0];
    let entry = causal_entry(analysis, X)?;
    let experiments = view["experiments"].as_array().map_or(0, Vec::len);
    let zero_visits = analysis["discarded"].as_array().map_or(0, |discarded| {
        discarded
            .iter()
            .filter(|d| d["reason"] == "zero_visits")
            .count()
    });
    // The experiments no analysis can use (the last one, cut short by the stop; sped-up
    // ones that inserted no delay) are discarded for that first.
    let usable = view["experiments"].as_array().map_or(0, |all| {
        all.iter().filter(|e| e["discarded"].is_null()).count()
    });
    writeln!(
        report,
        "zero visits: {experiments} experiments, {zero_visits} discarded for zero visits, X's fit: {}",
        entry["fit"]
    )?;
    if entry["fit"]["kind"] == "slope" {
        failures.push("a point nobody signals gave X a slope".to_string());
    }
    if usable == 0 || zero_visits != usable {
        failures.push(format!(
            "{zero_visits} of the zero-visit run's {usable} usable experiments were discarded for \
             zero visits, want all"
        ));
    }
    Ok(())
}

/// `dprof report --view causal` as text, as the user reads it.
fn causal_view_text(profile: &Path) -> Result<String> {
    let dprof = std::env::var("DPROF").unwrap_or_else(|_| "dprof".to_string());
    let output = std::process::Command::new(&dprof)
        .args(["report", "--view", "causal"])
        .arg(profile)
        .output()
        .with_context(|| format!("running {dprof}"))?;
    ensure!(
        output.status.success(),
        "dprof report --view causal exited with {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The sped-up experiments on type table entry `index` that ran to their end.
fn sped_up_whole(
    ends: &[dprof_abi::ExperimentEnd],
    index: usize,
) -> Vec<&dprof_abi::ExperimentEnd> {
    ends.iter()
        .filter(|e| {
            e.control.type_index as usize == index && e.control.speedup_percent > 0 && e.flags == 0
        })
        .collect()
}

/// The run on functions: the two most sampled of the workload chosen, delay inserted in
/// their experiments, and the view naming them.
fn check_functions(dir: &Path, report: &mut String, failures: &mut Vec<String>) -> Result<()> {
    let path = dir.join("functions.dprof");
    let Experiments { config, ends, .. } = experiments(&path)?;
    let mut names: Vec<&str> = config.types.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if names != [COMPUTE, Y_TOUCH] {
        failures.push(format!(
            "--units functions --top 2 chose {names:?}, want the workload's two most sampled \
             functions {COMPUTE} and {Y_TOUCH}"
        ));
    }
    for (index, spec) in config.types.iter().enumerate() {
        if spec.unit != dprof_format::CausalUnit::Function {
            failures.push(format!(
                "{} is a {:?}, not a function",
                spec.name, spec.unit
            ));
        }
        if spec.ips < MIN_FUNCTION_IPS {
            failures.push(format!(
                "{} lists {} instructions, want its every instruction (>= {MIN_FUNCTION_IPS})",
                spec.name, spec.ips
            ));
        }
        let sped_up = sped_up_whole(&ends, index);
        let delayed = sped_up.iter().filter(|e| e.delay_ns > 0).count();
        let delay_ns: u64 = sped_up.iter().map(|e| e.delay_ns).sum();
        let samples: u64 = sped_up.iter().map(|e| e.type_samples).sum();
        writeln!(
            report,
            "functions: {} ({} instructions, {} samples in the profiling phase): {} sped-up \
             experiments, {delayed} inserted delay, {:.3} s in all, {samples} samples on it",
            spec.name,
            spec.ips,
            spec.plan_samples,
            sped_up.len(),
            delay_ns as f64 / 1e9
        )?;
        if sped_up.is_empty() || (delayed as f64) < MIN_DELAYED_SHARE * sped_up.len() as f64 {
            failures.push(format!(
                "{}: {delayed} of its {} sped-up experiments inserted delay, want >= {:.0}%",
                spec.name,
                sped_up.len(),
                100.0 * MIN_DELAYED_SHARE
            ));
        }
    }
    let view = report_json(&path, &["--view", "causal"])?;
    let analysis = analysis_of(&view, ROUND_POINT).context("the functions run")?;
    let (compute, y_touch) = (
        causal_entry(analysis, COMPUTE)?,
        causal_entry(analysis, Y_TOUCH)?,
    );
    writeln!(
        report,
        "functions: causal {COMPUTE}: {}",
        describe_fit(compute)
    )?;
    writeln!(
        report,
        "functions: causal {Y_TOUCH}: {}",
        describe_fit(y_touch)
    )?;
    let slope = |entry: &Value| entry["fit"]["slope"].as_f64().unwrap_or(f64::NAN);
    if slope(compute).is_nan() || slope(compute) <= slope(y_touch) {
        failures.push(format!(
            "the computation on the critical path is not ranked above the Y accesses: \
             {COMPUTE} {}; {Y_TOUCH} {}",
            describe_fit(compute),
            describe_fit(y_touch)
        ));
    }
    let text = causal_view_text(&path)?;
    let ranked_by_name = text.contains("functions ranked by slope")
        && [COMPUTE, Y_TOUCH].iter().all(|name| text.contains(name));
    if !ranked_by_name {
        failures.push(format!(
            "the functions run's causal view does not rank functions by name:\n{text}"
        ));
    }
    Ok(())
}

/// The run whose scope holds the round functions only: their callees' samples counted for
/// them, and the chain's round on the critical path.
fn check_callers(dir: &Path, report: &mut String, failures: &mut Vec<String>) -> Result<()> {
    let path = dir.join("callers.dprof");
    let Experiments { config, ends, .. } = experiments(&path)?;
    if !config.callers_in_scope {
        failures.push("the callers run's profile says no sample was counted for a caller".into());
    }
    let index_of = |suffix: &str| config.types.iter().position(|t| t.name.ends_with(suffix));
    let (Some(chain), Some(worker)) = (index_of("chain_round"), index_of("worker_round")) else {
        bail!(
            "the callers run's table holds {:?}, not the two round functions",
            config.types.iter().map(|t| &t.name).collect::<Vec<_>>()
        );
    };
    for (index, least) in [(chain, MIN_CHAIN_SHARE), (worker, MIN_WORKER_SHARE)] {
        let spec = &config.types[index];
        let sped_up = sped_up_whole(&ends, index);
        let delay: f64 = sped_up.iter().map(|e| e.delay_ns as f64).sum();
        let asked: f64 = sped_up
            .iter()
            .map(|e| f64::from(e.control.speedup_percent) / 100.0 * e.wall_ns as f64)
            .sum();
        let samples: u64 = sped_up.iter().map(|e| e.type_samples).sum();
        let all: u64 = sped_up.iter().map(|e| e.samples).sum();
        let share = delay / asked;
        writeln!(
            report,
            "callers: {} ({} samples of its own in the profiling phase): {} sped-up \
             experiments, {samples} of their {all} samples counted for it, delay {share:.2} of \
             speedup x wall time",
            spec.name,
            spec.plan_samples,
            sped_up.len()
        )?;
        if share.is_nan() || share < least {
            failures.push(format!(
                "callers: {}'s experiments inserted {share:.2} of speedup x wall time, want at \
                 least {least}: its callees' samples were not counted for it",
                spec.name
            ));
        }
    }
    let view = report_json(&path, &["--view", "causal"])?;
    let analysis = analysis_of(&view, ROUND_POINT).context("the callers run")?;
    let (chain_name, worker_name) = (&config.types[chain].name, &config.types[worker].name);
    let (chain_entry, worker_entry) = (
        causal_entry(analysis, chain_name)?,
        causal_entry(analysis, worker_name)?,
    );
    writeln!(
        report,
        "callers: causal chain round: {}",
        describe_fit(chain_entry)
    )?;
    writeln!(
        report,
        "callers: causal worker round: {}",
        describe_fit(worker_entry)
    )?;
    let fit = |entry: &Value, key: &str| entry["fit"][key].as_f64().unwrap_or(f64::NAN);
    if !(fit(chain_entry, "low") > 0.0 && fit(chain_entry, "slope") > fit(worker_entry, "slope")) {
        failures.push(format!(
            "callers: the chain's round, on the critical path, is not above 0 and the worker's \
             round: {}; {}",
            describe_fit(chain_entry),
            describe_fit(worker_entry)
        ));
    }
    if !causal_view_text(&path)?.contains("so a helper's time went to its caller in scope") {
        failures.push("the callers run's causal view does not say how it counted".into());
    }
    Ok(())
}

/// The run with a sampled progress point: samples counted in the experiments, no more than
/// were taken, and the view saying the point is sampled.
fn check_sampled(dir: &Path, report: &mut String, failures: &mut Vec<String>) -> Result<()> {
    let path = dir.join("sampled.dprof");
    let Experiments { config, ends, .. } = experiments(&path)?;
    let sampled_index = point_index(&config, SAMPLED_POINT)?;
    let kprobe = point_index(&config, ROUND_POINT)?;
    let complete: Vec<_> = ends.iter().filter(|e| e.flags == 0).collect();
    let counted = complete
        .iter()
        .filter(|e| e.points[sampled_index].visits > 0)
        .count();
    let sample_visits: u64 = complete
        .iter()
        .map(|e| e.points[sampled_index].visits)
        .sum();
    let all_samples: u64 = complete.iter().map(|e| e.samples).sum();
    let rounds: u64 = complete.iter().map(|e| e.points[kprobe].visits).sum();
    writeln!(
        report,
        "sampled: {counted} of {} complete experiments counted samples in the computation; \
         {sample_visits} of the {all_samples} samples taken, against {rounds} rounds",
        complete.len()
    )?;
    // Visits are snapshotted just before the experiment's samples stop counting, so the
    // samples of the two instants between the snapshots (one per CPU at most) are slack.
    let slack = 2 * complete.len() as u64;
    if sample_visits > all_samples + slack {
        failures.push(format!(
            "the sampled point counted {sample_visits} visits, more than the {all_samples} \
             samples the experiments took"
        ));
    }
    if complete.is_empty() || (counted as f64) < MIN_SAMPLED_SHARE * complete.len() as f64 {
        failures.push(format!(
            "the sampled point counted samples in {counted} of {} complete experiments, want \
             at least {:.0}%",
            complete.len(),
            100.0 * MIN_SAMPLED_SHARE
        ));
    }
    let text = causal_view_text(&path)?;
    if !text.contains(&format!("Throughput of {SAMPLED_POINT} (sampled point:")) {
        failures.push("the causal view does not say that the point is sampled".to_string());
    }
    let (view, _) = causal_view_json(&path)?;
    let analysis = analysis_of(&view, SAMPLED_POINT)?;
    let (x, y) = (causal_entry(analysis, X)?, causal_entry(analysis, Y)?);
    // Reported only: the run is too short for a ranking (see the module's doc).
    writeln!(report, "sampled X: {}", describe_fit(x))?;
    writeln!(report, "sampled Y: {}", describe_fit(y))?;
    Ok(())
}
