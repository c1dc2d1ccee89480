//! `dprof report --view causal`: the types (or functions, or modules: the table's unit)
//! ranked by their causal effect on each progress point (slope of program speedup against
//! virtual speedup, with its 95% interval and flags, beside the rank by samples in the
//! profiling phase), the experiments left out by reason, and what the view could not see;
//! `--json` prints the causal report, `--format coz` Coz's profile format.
//!
//! Only the experiment records are read: the view needs neither samples nor symbols.

use std::io::{self, Write};
use std::process::ExitCode;

use dprof_analysis::causal;
use dprof_format::Profile;
use dprof_model::causal::{
    Analysis, CausalReport, CausalType, CausalUnit, DelayAccounting, Fit, Target, TypeSlope,
};

use super::args::{Format, ReportArgs, DEFAULT_TOP};
use super::output::{more, no_such_type, notes_text, to_stdout, Table};

pub(super) fn run(args: &ReportArgs, profile: &Profile) -> anyhow::Result<ExitCode> {
    let report = causal::analyze_profile(profile)
        .map_err(|e| anyhow::Error::new(e).context(args.file.display().to_string()))?;
    let selected = match &args.type_name {
        Some(name) => Some(find_type(&report, name)?),
        None => None,
    };
    let top = args.top.unwrap_or(DEFAULT_TOP);
    let written = to_stdout(|out| {
        if args.format == Format::Coz {
            // The file then has nothing for Coz's viewer to plot, and says nothing itself.
            if let Some(empty) = &report.why_empty {
                eprintln!("dprof: warning: {}", empty.message);
            }
            return dprof_export::coz::write_coz(&report, out);
        }
        if args.json {
            serde_json::to_writer_pretty(&mut *out, &report).map_err(io::Error::other)?;
            return writeln!(out);
        }
        summary(&report, out)?;
        delays(&report, out)?;
        modules(&report, out)?;
        if let Some(empty) = &report.why_empty {
            writeln!(out, "nothing to rank: {}", empty.message)?;
        }
        for analysis in &report.analyses {
            writeln!(out)?;
            match selected {
                Some(index) => type_points(&report, analysis, index, out)?,
                None => ranking(&report, analysis, top, out)?,
            }
        }
        writeln!(out)?;
        discarded(&report, out)?;
        writeln!(out)?;
        if report.unseen.is_empty() {
            writeln!(
                out,
                "could not see: nothing left out (every {} selected, every experiment used)",
                report.unit_word()
            )
        } else {
            notes_text(&report.unseen, out)
        }
    })?;
    Ok(if report.why_empty.is_some() {
        ExitCode::from(EXIT_NOTHING_TO_RANK)
    } else {
        written
    })
}

/// The exit status of a causal view that ranks no type (its output says why): not 1, so that
/// a script tells it from a failure.
const EXIT_NOTHING_TO_RANK: u8 = 3;

/// The index of the entry `name` in the type table: a type, function or module by its name
/// or as the report writes it (`[ext4]`).
fn find_type(report: &CausalReport, name: &str) -> anyhow::Result<usize> {
    report
        .types
        .iter()
        .position(|t| t.name == name || t.label() == name)
        .ok_or_else(|| {
            let names: Vec<String> = report.types.iter().map(CausalType::label).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            no_such_type(name, "causal type table", &names)
        })
}

fn summary(report: &CausalReport, out: &mut impl Write) -> io::Result<()> {
    let used = report.experiments.len() - report.discarded_experiments();
    match report.end_to_end_runs {
        Some(runs) => writeln!(
            out,
            "Causal experiments: {} ({used} usable), {} {} in the table; end-to-end \
             (--end-to-end {runs}): each experiment is one whole run of the command, measured \
             by runs per effective second (the run's time less the delays inserted in it)",
            report.experiments.len(),
            report.types.len(),
            report.units_plural(),
        )?,
        None => writeln!(
            out,
            "Causal experiments: {} ({used} usable), {} {} in the table, progress points: {}; \
             experiments of {} ms",
            report.experiments.len(),
            report.types.len(),
            report.units_plural(),
            report.points.join(", "),
            report.experiment_ns / 1_000_000
        )?,
    }
    let sped_up = match report.unit() {
        Some(CausalUnit::Type) => "the type's accesses".to_owned(),
        _ => format!("the {}'s instructions", report.unit_word()),
    };
    match report.fixed_speedup_percent {
        Some(percent) => writeln!(
            out,
            "slope: program speedup per unit of virtual speedup of {sped_up}, every sped-up \
             experiment at {percent}% (--fixed-speedup): their mean program speedup (each \
             against the 0% experiments just before and after it) over {percent}%, 95% \
             interval (Student t); one speedup, so the slope assumes the effect is linear"
        ),
        None => writeln!(
            out,
            "slope: program speedup per unit of virtual speedup of {sped_up}, least squares \
             over its sped-up experiments (each against the 0% experiments just before and \
             after it), with an intercept, 95% interval (Student t)"
        ),
    }
}

/// Whose delays the experiments kept, what was forgiven, and whether the task table held.
fn delays(report: &CausalReport, out: &mut impl Write) -> io::Result<()> {
    let credited = format!("{:.1} ms", report.credited_ns() as f64 / 1e6);
    match report.delay_accounting {
        DelayAccounting::Task => writeln!(
            out,
            "delays: per task (Coz's rules for threads): a task woken by a timer or an \
             interrupt serves the delays inserted while it slept, one woken by another task is \
             credited with what that task had served ({credited} credited in all)"
        )?,
        DelayAccounting::Cpu => writeln!(
            out,
            "delays: per CPU (--delay-accounting cpu): a CPU found idle is credited with what \
             it owes ({credited} in all), which forgives a task woken by a timer the delays of \
             its sleep: such work looks faster than it would be"
        )?,
    }
    if let Some(note) = report.load_note() {
        writeln!(out, "{note}")?;
    }
    if let Some(behind) = report.fell_behind {
        writeln!(out, "{}", behind.note())?;
    }
    if !report.callers_in_scope.is_empty() {
        writeln!(
            out,
            "scope: {}: a kernel sample outside it counted for the first function in it on \
             its call chain (up to {} frames up), so a helper's time went to its caller in \
             scope",
            report.callers_in_scope.join(","),
            dprof_abi::MAX_CALLER_FRAMES
        )?;
    }
    let full = report.task_table_full_experiments();
    if full > 0 {
        let experiments = if full == 1 {
            "experiment"
        } else {
            "experiments"
        };
        writeln!(
            out,
            "{full} {experiments} kept some tasks' delays per CPU: the module's task table was \
             full"
        )?;
    }
    Ok(())
}

/// What each module entry sped up: its functions, and those the instruction cap left out.
fn modules(report: &CausalReport, out: &mut impl Write) -> io::Result<()> {
    /// Functions named per module; the JSON has them all.
    const SHOWN: usize = 5;
    for t in report.types.iter().filter(|t| t.unit == CausalUnit::Module) {
        let mut shown: Vec<&str> = t.functions.iter().take(SHOWN).map(String::as_str).collect();
        if t.functions.len() > SHOWN {
            shown.push("...");
        }
        let left_out = if t.functions_left_out == 0 {
            "every function in scope".to_owned()
        } else {
            format!(
                "{} more in scope left out by the {} instructions one entry takes",
                t.functions_left_out,
                dprof_abi::MAX_CAUSAL_TYPE_IPS
            )
        };
        writeln!(
            out,
            "module {}: {} functions sped up, most sampled first ({}); {left_out}",
            t.label(),
            t.functions.len(),
            shown.join(", ")
        )?;
    }
    Ok(())
}

/// "+0.487".
fn signed(v: f64) -> String {
    format!("{v:+.3}")
}

fn rank(r: Option<usize>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| r.to_string())
}

/// The measure in its unit: `200012 visits/s`, `4000 ns`.
fn measure(analysis: &Analysis, v: f64) -> String {
    analysis.target.format(v)
}

fn what(analysis: &Analysis) -> String {
    match analysis.target {
        Target::Throughput { .. } => match analysis.sampled_note() {
            Some(note) => format!("Throughput of {} ({note})", analysis.name),
            None => format!("Throughput of {}", analysis.name),
        },
        Target::Latency { .. } => {
            format!("Latency of {} (Little's law)", analysis.name)
        }
    }
}

fn flags(t: &TypeSlope) -> String {
    match &t.fit {
        Fit::Slope(s) if s.hurts => "hurts (contention)".to_owned(),
        Fit::Slope(s) if s.within_noise => "within noise".to_owned(),
        Fit::Slope(_) => String::new(),
        Fit::NoSlope {
            reason,
            distinct_speedups,
        } => format!("no slope: {}", reason.describe(*distinct_speedups)),
    }
}

fn ranking(
    report: &CausalReport,
    analysis: &Analysis,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{}: {} ranked by slope",
        what(analysis),
        report.units_plural()
    )?;
    let mut table = Table::new(&[
        ("rank", true),
        (report.unit_word(), false),
        ("slope", true),
        ("95% interval", false),
        ("flags", false),
        ("experiments", true),
        ("speedups", true),
        ("baseline", true),
        (sample_rank_heading(report), true),
    ]);
    for t in analysis.types.iter().take(top) {
        let (slope, interval) = match t.fit.slope() {
            Some(s) => (
                signed(s.slope),
                format!("[{}, {}]", signed(s.low), signed(s.high)),
            ),
            None => ("-".to_owned(), "-".to_owned()),
        };
        let experiments = if t.experiments == 0 {
            "0".to_owned()
        } else {
            format!("{} ({} at 0%)", t.experiments, t.baseline_experiments)
        };
        table.row(vec![
            rank(t.rank),
            report.label_of(t.type_index),
            slope,
            interval,
            flags(t),
            experiments,
            t.speedups.len().to_string(),
            t.baseline
                .map_or_else(|| "-".to_owned(), |b| measure(analysis, b)),
            rank(t.data_profile_rank),
        ]);
    }
    table.write(out)?;
    more(out, analysis.types.len(), top, report.units_plural())
}

/// The heading of the rank by samples in the profiling phase: the data profile's for types,
/// the samples' on the code for functions and modules.
fn sample_rank_heading(report: &CausalReport) -> &'static str {
    match report.unit() {
        Some(CausalUnit::Type) => "data rank",
        _ => "sample rank",
    }
}

/// One entry's pooled points per virtual speedup (`--type`).
fn type_points(
    report: &CausalReport,
    analysis: &Analysis,
    index: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let Some(t) = analysis.types.iter().find(|t| t.type_index == index) else {
        return Ok(());
    };
    let verdict = match t.fit.slope() {
        Some(s) => format!(
            "slope {} [{}, {}], rank {}",
            signed(s.slope),
            signed(s.low),
            signed(s.high),
            rank(t.rank)
        ),
        None => flags(t),
    };
    let described = match report.causal_type(index).map(|t| t.unit) {
        Some(CausalUnit::Type) | None => report.label_of(index),
        Some(unit) => format!("{} {}", unit.word(), report.label_of(index)),
    };
    writeln!(
        out,
        "{}: {described} ({verdict}; {} {})",
        what(analysis),
        sample_rank_heading(report),
        rank(t.data_profile_rank)
    )?;
    let mut table = Table::new(&[
        ("virtual speedup", true),
        ("experiments", true),
        ("measure", true),
        ("program speedup", true),
    ]);
    for p in &t.speedups {
        table.row(vec![
            format!("{}%", p.speedup_percent),
            p.experiments.to_string(),
            measure(analysis, p.value),
            format!("{:+.1}%", p.program_speedup * 100.0),
        ]);
    }
    table.write(out)
}

fn discarded(report: &CausalReport, out: &mut impl Write) -> io::Result<()> {
    let groups = report.discard_groups();
    if groups.is_empty() {
        return writeln!(out, "Discarded experiments: none");
    }
    writeln!(out, "Discarded experiments, by reason:")?;
    for g in groups {
        let numbers: Vec<String> = g.experiments.iter().map(u32::to_string).collect();
        let whose = g
            .analysis
            .map_or_else(String::new, |a| format!(" (for {a})"));
        writeln!(
            out,
            "  {}{whose}: {} (experiment {})",
            g.reason.describe(),
            g.experiments.len(),
            numbers.join(", ")
        )?;
    }
    Ok(())
}
