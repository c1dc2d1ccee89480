//! `dprof report --view working-set`: live objects, cache residency and set histograms per
//! slab type, as a table, with `--type` for one type, or the histograms as CSV; with
//! `--by-set`, the types each associativity set holds ([`by_set`]).

mod by_set;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use dprof_model::units::format_bytes;
use dprof_model::working_set::{SetHistogram, TypeWorkingSet, WorkingSetReport};
use dprof_model::Report;

use super::args::{Format, ReportArgs, DEFAULT_TOP};
use super::output::{
    csv_field, geometry_line, header_lines, no_such_type, notes_text, report_json, since_start,
    to_stdout, Table,
};

/// Rows of the live-object series shown for one type.
const SERIES_ROWS: usize = 10;

pub(super) fn run(args: &ReportArgs, report: &Report) -> anyhow::Result<ExitCode> {
    let ws = report
        .working_set
        .as_ref()
        .context("the analysis made no working set")?;
    let selected = match &args.type_name {
        Some(name) => Some(ws.find_type(name).ok_or_else(|| {
            let names: Vec<&str> = ws.types.iter().map(|t| t.name.as_str()).collect();
            no_such_type(name, "working set", &names)
        })?),
        None => None,
    };
    let top = args.top.unwrap_or(DEFAULT_TOP);
    to_stdout(|out| {
        if args.json {
            let mut r = report.clone();
            if let (Some(w), Some(t)) = (&mut r.working_set, selected) {
                w.types.retain(|x| x.name == t.name);
                for level in &mut w.by_set {
                    level
                        .occupied
                        .retain(|s| s.types.iter().any(|x| x.name == t.name));
                }
            }
            return report_json(&r, out);
        }
        let only = selected.map(|t| t.name.as_str());
        if args.format == Format::Csv {
            return if args.by_set {
                by_set::csv(report, ws, only, out)
            } else {
                csv(ws, selected, out)
            };
        }
        header_lines(report, out)?;
        geometry_line(&ws.geometry, out)?;
        writeln!(out)?;
        match selected {
            _ if args.by_set => {
                let sets = args.top.unwrap_or(by_set::DEFAULT_SETS);
                by_set::text(report, ws, only, sets, out)?;
            }
            Some(t) => type_text(ws, t, top, out)?,
            None => table(ws, top, out)?,
        }
        writeln!(out)?;
        simulation_line(ws, out)?;
        writeln!(out)?;
        notes_text(&ws.notes, out)
    })
}

fn table(ws: &WorkingSetReport, top: usize, out: &mut impl Write) -> io::Result<()> {
    let span = match (ws.times_ns.first(), ws.times_ns.last()) {
        (Some(&a), Some(&b)) => b.saturating_sub(a),
        _ => 0,
    };
    writeln!(
        out,
        "Working set: {} slab types over {:.3} ms; lines: the mean each level holds, from the \
         cache simulation",
        ws.types.len(),
        span as f64 / 1e6
    )?;
    let level_headers: Vec<String> = ws
        .geometry
        .iter()
        .map(|l| format!("{} lines", l.name))
        .collect();
    let mut header: Vec<(&str, bool)> = vec![
        ("type", false),
        ("peak objs", true),
        ("mean objs", true),
        ("peak bytes", true),
        ("mean bytes", true),
    ];
    header.extend(level_headers.iter().map(|h| (h.as_str(), true)));
    header.push(("flagged sets", false));
    let mut table = Table::new(&header);
    for t in ws.types.iter().take(top) {
        let mut row = vec![
            t.name.clone(),
            t.peak_objects.to_string(),
            format!("{:.1}", t.mean_objects),
            format_bytes(t.peak_bytes),
            format_bytes(t.mean_bytes.round() as u64),
        ];
        row.extend(ws.geometry.iter().map(|l| {
            t.resident_lines
                .iter()
                .find(|r| r.level == l.name)
                .map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r.mean_lines))
        }));
        let flagged: Vec<String> = t
            .histograms
            .iter()
            .filter(|h| !h.flagged_sets.is_empty())
            .map(|h| format!("{} {}", h.level, h.flagged_sets.len()))
            .collect();
        row.push(if flagged.is_empty() {
            "-".to_owned()
        } else {
            flagged.join(", ")
        });
        table.row(row);
    }
    table.write(out)?;
    if ws.types.len() > top {
        writeln!(
            out,
            "... {} more types (--top N shows more)",
            ws.types.len() - top
        )?;
    }
    writeln!(
        out,
        "(flagged sets: per level, sets holding more of the type's lines than ways and at \
         least twice its mean, at its peak; --type NAME shows its histograms, --by-set the \
         types sharing each set)"
    )
}

fn type_text(
    ws: &WorkingSetReport,
    t: &TypeWorkingSet,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let ranges: Vec<String> = t
        .touched_ranges
        .iter()
        .map(|[s, e]| format!("+{s:#x}..+{e:#x}"))
        .collect();
    writeln!(
        out,
        "Working set of {}: peak {} objects ({}) at {}, mean {:.1} objects ({})",
        t.name,
        t.peak_objects,
        format_bytes(t.peak_bytes),
        since_start(ws, t.peak_time_ns),
        t.mean_objects,
        format_bytes(t.mean_bytes.round() as u64)
    )?;
    if ranges.is_empty() {
        writeln!(
            out,
            "touched: nothing known (no sample or history): no lines to simulate or count"
        )?;
    } else {
        writeln!(out, "touched: {}", ranges.join(", "))?;
    }
    if !t.resident_lines.is_empty() {
        let lines: Vec<String> = t
            .resident_lines
            .iter()
            .map(|r| format!("{} {:.1}", r.level, r.mean_lines))
            .collect();
        writeln!(out, "lines held (simulated, mean): {}", lines.join(", "))?;
    }
    writeln!(out)?;
    let n = ws.times_ns.len();
    writeln!(
        out,
        "Live objects ({} of the {n} points; --json has all)",
        SERIES_ROWS.min(n)
    )?;
    let mut series = Table::new(&[("time", true), ("objects", true), ("bytes", true)]);
    for k in 0..SERIES_ROWS.min(n) {
        let i = if SERIES_ROWS >= n {
            k
        } else {
            k * (n - 1) / (SERIES_ROWS - 1)
        };
        series.row(vec![
            since_start(ws, ws.times_ns[i]),
            t.live_objects.get(i).copied().unwrap_or(0).to_string(),
            format_bytes(t.live_bytes.get(i).copied().unwrap_or(0)),
        ]);
    }
    series.write(out)?;
    for h in &t.histograms {
        writeln!(out)?;
        histogram_text(h, top, out)?;
    }
    Ok(())
}

fn histogram_text(h: &SetHistogram, top: usize, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{} sets by the type's lines in them ({} sets, {} ways; mean {:.3} lines per set, max {})",
        h.level, h.sets, h.ways, h.mean_lines_per_set, h.max_lines_per_set
    )?;
    let mut table = Table::new(&[("lines", true), ("sets", true), ("", false)]);
    for b in &h.lines_per_set {
        table.row(vec![
            b.lines.to_string(),
            b.sets.to_string(),
            if h.conflicted(b.lines) {
                "flagged".to_owned()
            } else {
                String::new()
            },
        ]);
    }
    table.write(out)?;
    if !h.flagged_sets.is_empty() {
        let shown: Vec<String> = h
            .flagged_sets
            .iter()
            .take(top)
            .map(u64::to_string)
            .collect();
        let more = if h.flagged_sets.len() > top {
            format!(", ... ({} in all)", h.flagged_sets.len())
        } else {
            String::new()
        };
        writeln!(out, "flagged sets: {}{more}", shown.join(", "))?;
    }
    Ok(())
}

fn simulation_line(ws: &WorkingSetReport, out: &mut impl Write) -> io::Result<()> {
    let s = &ws.simulation;
    writeln!(
        out,
        "simulation: {} objects of {} ({} following path traces), {} accesses in {:.3} s: \
         {:.2} M accesses/s (seed {:#x})",
        s.objects,
        s.eligible_objects,
        s.objects_from_paths,
        s.accesses,
        s.seconds,
        s.accesses_per_second / 1e6,
        s.seed
    )
}

/// One row per type, level and lines-per-set bucket.
fn csv(
    ws: &WorkingSetReport,
    selected: Option<&TypeWorkingSet>,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "type,level,lines_per_set,sets,flagged")?;
    let types: Vec<&TypeWorkingSet> = match selected {
        Some(t) => vec![t],
        None => ws.types.iter().collect(),
    };
    for t in types {
        for h in &t.histograms {
            for b in &h.lines_per_set {
                writeln!(
                    out,
                    "{},{},{},{},{}",
                    csv_field(&t.name),
                    h.level,
                    b.lines,
                    b.sets,
                    if h.conflicted(b.lines) { "yes" } else { "no" }
                )?;
            }
        }
    }
    Ok(())
}
