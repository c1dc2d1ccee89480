//! `dprof report --view misses`: why each slab type's accesses miss, as a table of classes
//! per type, or with `--type` the evidence for one type.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use dprof_model::misses::{MissClass, MissReport, SharingSite, TypeMisses};
use dprof_model::units::format_bytes;
use dprof_model::Report;

use super::args::{ReportArgs, DEFAULT_TOP};
use super::output::{
    geometry_line, header_lines, no_such_type, notes_text, report_json, to_stdout, Table,
};

pub(super) fn run(args: &ReportArgs, report: &Report) -> anyhow::Result<ExitCode> {
    let misses = report
        .misses
        .as_ref()
        .context("the analysis made no miss classification")?;
    let selected = match &args.type_name {
        Some(name) => Some(misses.find_type(name).ok_or_else(|| {
            let names: Vec<&str> = misses.types.iter().map(|t| t.name.as_str()).collect();
            no_such_type(name, "miss classification", &names)
        })?),
        None => None,
    };
    let top = args.top.unwrap_or(DEFAULT_TOP);
    to_stdout(|out| {
        if args.json {
            let mut r = report.clone();
            if let (Some(m), Some(t)) = (&mut r.misses, selected) {
                m.types.retain(|x| x.name == t.name);
            }
            return report_json(&r, out);
        }
        header_lines(report, out)?;
        geometry_line(&misses.geometry, out)?;
        writeln!(out)?;
        match selected {
            Some(t) => type_text(misses, t, top, out)?,
            None => table(misses, top, out)?,
        }
        writeln!(out)?;
        notes_text(&misses.notes, out)
    })
}

/// "58.3%", or "-" for nothing.
fn share(count: f64, total: u64) -> String {
    if count <= 0.0 || total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", count * 100.0 / total as f64)
    }
}

fn what(m: &MissReport) -> &'static str {
    if m.inferred {
        "samples"
    } else {
        "misses"
    }
}

fn table(m: &MissReport, top: usize, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Miss classification: {} slab types; {}",
        m.types.len(),
        m.basis
    )?;
    let mut header: Vec<(&str, bool)> = vec![("type", false), (what(m), true)];
    header.extend(MissClass::ALL.iter().map(|c| (c.name(), true)));
    header.push(("dominant", false));
    let mut table = Table::new(&header);
    for t in m.types.iter().take(top) {
        let mut row = vec![t.name.clone(), t.total.to_string()];
        row.extend(MissClass::ALL.iter().map(|&c| share(t.count(c), t.total)));
        row.push(if t.total == 0 {
            "-".to_owned()
        } else {
            format!("{} (by {:.1} points)", t.dominant.name(), t.margin)
        });
        table.row(row);
    }
    table.write(out)?;
    if m.types.len() > top {
        writeln!(
            out,
            "... {} more types (--top N shows more)",
            m.types.len() - top
        )?;
    }
    writeln!(
        out,
        "(percent of each type's {}; --type NAME shows the evidence)",
        what(m)
    )
}

/// `vw_write_b +0x8/8 counter_b`.
fn site(s: &SharingSite) -> String {
    match &s.field {
        Some(f) => format!("{} +{:#x}/{} {f}", s.function, s.offset, s.size),
        None => format!("{} +{:#x}/{}", s.function, s.offset, s.size),
    }
}

fn type_text(m: &MissReport, t: &TypeMisses, top: usize, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Miss classification of {}; {}", t.name, m.basis)?;
    let mut parts: Vec<(f64, String)> = t
        .classes
        .iter()
        .filter(|c| c.count > 0.0)
        .map(|c| (c.count, format!("{} {:.1}%", c.class.name(), c.percent)))
        .collect();
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let parts: Vec<String> = parts.into_iter().map(|p| p.1).collect();
    if t.total == 0 {
        writeln!(out, "{}: none", what(m))?;
    } else {
        writeln!(
            out,
            "{} {}: {} (dominant: {}, by {:.1} points)",
            t.total,
            what(m),
            parts.join(", "),
            t.dominant.name(),
            t.margin
        )?;
    }
    match &t.history_accesses {
        Some(h) => writeln!(
            out,
            "history accesses judged: {}: {} true sharing, {} false sharing, {} cannot tell, \
             the rest no invalidation",
            h.accesses, h.true_sharing, h.false_sharing, h.cannot_tell
        )?,
        None => writeln!(
            out,
            "no histories of this type: sharing cannot be seen (collect --histories)"
        )?,
    }
    evidence_tables(t, top, out)?;
    writeln!(out)?;
    set_lines(m, t, top, out)
}

/// The sharing and cannot-tell evidence of one type.
fn evidence_tables(t: &TypeMisses, top: usize, out: &mut impl Write) -> io::Result<()> {
    if !t.sharing.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Sharing: a write, then an access from another CPU that it invalidated"
        )?;
        let mut table = Table::new(&[
            ("class", false),
            ("count", true),
            ("writer", false),
            ("cpu", true),
            ("missing", false),
            ("cpu", true),
        ]);
        for e in t.sharing.iter().take(top) {
            table.row(vec![
                e.class.name().to_owned(),
                e.count.to_string(),
                site(&e.writer),
                e.writer.cpu.to_string(),
                site(&e.missing),
                e.missing.cpu.to_string(),
            ]);
        }
        table.write(out)?;
        more(out, t.sharing.len(), top)?;
    }
    if !t.cannot_tell.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Cannot tell: the line holds a neighbour object too, which the history cannot see"
        )?;
        let mut table = Table::new(&[
            ("count", true),
            ("access", false),
            ("cpu", true),
            ("neighbour", false),
        ]);
        for e in t.cannot_tell.iter().take(top) {
            table.row(vec![
                e.count.to_string(),
                site(&e.missing),
                e.missing.cpu.to_string(),
                e.neighbour_type.clone(),
            ]);
        }
        table.write(out)?;
        more(out, t.cannot_tell.len(), top)?;
    }
    Ok(())
}

/// The conflict and capacity lines of one type.
fn set_lines(m: &MissReport, t: &TypeMisses, top: usize, out: &mut impl Write) -> io::Result<()> {
    if t.conflict.is_empty() {
        writeln!(out, "conflict: no set flagged at any level")?;
    }
    for c in &t.conflict {
        let shown: Vec<String> = c
            .flagged_sets
            .iter()
            .take(top)
            .map(u64::to_string)
            .collect();
        let more = if c.flagged_sets.len() > top {
            ", ..."
        } else {
            ""
        };
        writeln!(
            out,
            "conflict at {}: {} flagged sets ({}{more}) hold {} of its lines; {:.1} {} there",
            c.level,
            c.flagged_sets.len(),
            shown.join(", "),
            c.lines_in_flagged_sets,
            c.samples,
            what(m)
        )?;
    }
    match &t.capacity {
        Some(c) => writeln!(
            out,
            "capacity at {}: the sampled types' working set, {}, exceeds its {} and the type's \
             lines reach {:.1}% of its sets",
            c.level,
            format_bytes(c.working_set_bytes),
            format_bytes(c.cache_bytes),
            c.sets_covered_fraction * 100.0
        ),
        None => writeln!(
            out,
            "capacity: no level whose working set it exceeds with its lines spread over most sets"
        ),
    }
}

fn more(out: &mut impl Write, len: usize, top: usize) -> io::Result<()> {
    if len > top {
        writeln!(out, "... {} more (--top N shows more)", len - top)?;
    }
    Ok(())
}
