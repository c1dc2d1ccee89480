//! The causal report in Coz's profile format, so that Coz's viewer can plot it.
//!
//! Coz's profile is text, one record per line, fields separated by tabs, each field after the
//! first `key=value`. The viewer reads `experiment` lines (`selected`, `speedup` as a
//! fraction, `duration` as effective nanoseconds), then the point lines that follow each:
//! `throughput-point` (`name`, `delta`: visits) and `latency-point` (`name`, `arrivals`,
//! `departures`, `difference`: requests in flight); it skips `startup`, `runtime`,
//! `shutdown` and `samples` lines. It parses `delta`, `duration`, `arrivals`, `departures`
//! and `difference` as integers, combines experiments of one (selected, point, speedup) by
//! summing, and plots each against the one at speedup 0.
//!
//! Here `selected` is the table entry as every front end names it
//! ([`dprof_model::causal::CausalType::label`]): a type's name, a function's (`name [module]`
//! for a loadable module's), or a module's in brackets (`[vmlinux]`, `[ext4]`), so that the
//! viewer's legend says what was sped up. Exactly the experiments the analysis used are written,
//! each with the point lines of the analyses that used it, so the viewer sees the data the
//! causal view ranked. Two things differ by construction, and the viewer's plot shows them:
//! - Coz's viewer plots `1 - period_s / period_0` for throughput, where the causal view says
//!   `rate_s / rate_0 - 1`: same sign, same value near 0, `s / (1 + s)` against `s`.
//! - `difference` is the mean in flight over the experiment rounded to an integer (Coz writes
//!   a count there), so the viewer's latency, `difference x duration / arrivals`, is the
//!   causal view's up to that rounding and to arrivals standing for departures.
//!
//! Under load amplification (`dprof causal --arrival-speedup`) each `experiment` line also
//! carries `amplification`, the experiment's own (the viewer reads the fields it knows and
//! leaves the others).

use std::collections::BTreeSet;
use std::io::{self, Write};

use dprof_model::causal::{CausalReport, Target};

/// Writes `report` in Coz's profile format.
///
/// # Errors
/// Those of `out`.
pub fn write_coz(report: &CausalReport, out: &mut dyn Write) -> io::Result<()> {
    // Coz writes the time its profiler started; the viewer ignores it, and the causal
    // report keeps no clock, so the start of the session is time 0.
    writeln!(out, "startup\ttime=0")?;
    let used: Vec<BTreeSet<u32>> = report
        .analyses
        .iter()
        .map(|a| {
            a.types
                .iter()
                .flat_map(|t| t.experiment_points.iter().map(|p| p.experiment))
                .collect()
        })
        .collect();
    let amplified = report.amplification().is_some();
    for e in report.experiments.iter().filter(|e| e.discarded.is_none()) {
        let (Some(m), Some(t)) = (&e.measured, report.types.get(e.type_index as usize)) else {
            continue;
        };
        let users: Vec<usize> = (0..report.analyses.len())
            .filter(|&i| used[i].contains(&e.experiment))
            .collect();
        if users.is_empty() {
            continue;
        }
        let amplification = match m.amplification() {
            Some(a) if amplified => format!("\tamplification={a:.4}"),
            _ => String::new(),
        };
        writeln!(
            out,
            "experiment\tselected={}\tspeedup={}\tduration={}\tselected-samples={}{amplification}",
            field(&t.label()),
            f64::from(e.speedup_percent) / 100.0,
            m.effective_ns().max(0),
            m.type_samples
        )?;
        for analysis in users.iter().map(|&i| &report.analyses[i]) {
            match analysis.target {
                Target::Throughput { point } => {
                    let visits = m.points.get(point).map_or(0, |p| p.visits);
                    writeln!(
                        out,
                        "throughput-point\tname={}\tdelta={visits}",
                        field(&analysis.name)
                    )?;
                }
                Target::Latency { begin, end } => {
                    let visits = |i: usize| m.points.get(i).map_or(0, |p| p.visits);
                    let in_flight = m.mean_in_flight(begin, end).unwrap_or(0.0).round();
                    writeln!(
                        out,
                        "latency-point\tname={}\tarrivals={}\tdepartures={}\tdifference={}",
                        field(&analysis.name),
                        visits(begin),
                        visits(end),
                        in_flight.max(0.0) as u64
                    )?;
                }
            }
        }
    }
    // Coz's samples per source line; here the planning phase's samples per table entry, the
    // basis of the data-profile rank.
    for t in report.types.iter().filter(|t| t.plan_samples > 0) {
        writeln!(
            out,
            "samples\tlocation={}\tcount={}",
            field(&t.label()),
            t.plan_samples
        )?;
    }
    Ok(())
}

/// A value that cannot break the line: tabs and line ends become spaces.
fn field(value: &str) -> String {
    value.replace(['\t', '\n', '\r'], " ")
}
