//! What the views of `dprof report` share: tables, the header and geometry lines, notes, and
//! writing to standard output.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use dprof_model::cache::{CacheLevel, GeometrySource};
use dprof_model::working_set::WorkingSetReport;
use dprof_model::{Report, TypeProfile};

/// A table: left-aligned text columns and right-aligned numbers, two spaces apart.
pub(super) struct Table {
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(header: &[(&str, bool)]) -> Self {
        Self {
            right: header.iter().map(|&(_, r)| r).collect(),
            rows: vec![header.iter().map(|&(h, _)| h.to_owned()).collect()],
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(super) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut widths = vec![0usize; self.right.len()];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &self.rows {
            let mut line = String::new();
            for (i, (cell, (&w, &right))) in
                row.iter().zip(widths.iter().zip(&self.right)).enumerate()
            {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = w - cell.chars().count();
                if right {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Writes to standard output through `write`; a closed pipe (`| head`) is no error.
pub(super) fn to_stdout(
    write: impl FnOnce(&mut io::BufWriter<io::StdoutLock<'_>>) -> io::Result<()>,
) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other
            .context("cannot write to standard output")
            .map(|()| ExitCode::SUCCESS),
    }
}

/// The report model as JSON.
pub(super) fn report_json(report: &Report, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
    writeln!(out)
}

/// `caches: L1d 64 KiB 2-way, 64-byte lines, 512 sets (per CPU); ...` with where each came
/// from when --cache changed any.
pub(super) fn geometry_line(levels: &[CacheLevel], out: &mut impl Write) -> io::Result<()> {
    if levels.is_empty() {
        return writeln!(out, "caches: none known (--cache gives them)");
    }
    let overridden = levels.iter().any(|l| l.source == GeometrySource::Override);
    let parts: Vec<String> = levels
        .iter()
        .map(|l| {
            format!(
                "{} {} ({})",
                l.name,
                l.describe(),
                l.sharing_and_source(overridden)
            )
        })
        .collect();
    writeln!(out, "caches: {}", parts.join("; "))
}

/// The notes of a view, under "could not see".
pub(super) fn notes_text(notes: &[String], out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "could not see:")?;
    for n in notes {
        writeln!(out, "  - {n}")?;
    }
    Ok(())
}

/// "no type NAME in the VIEW; types there: ..." for a --type the view does not show.
pub(super) fn no_such_type(name: &str, view: &str, names: &[&str]) -> anyhow::Error {
    let shown: Vec<&str> = names.iter().take(10).copied().collect();
    if shown.is_empty() {
        anyhow::anyhow!("no type {name:?} in the {view}: it shows no type")
    } else {
        anyhow::anyhow!(
            "no type {name:?} in the {view}; types there: {}",
            shown.join(", ")
        )
    }
}

pub(super) fn header_lines(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let p = &report.profile;
    writeln!(
        out,
        "kernel {}, {} CPUs, {}",
        p.kernel_release, p.online_cpus, p.cpu_model
    )?;
    writeln!(out, "coverage: {}", report.coverage.summary)
}

/// `merged caches: rtable = {file_lock_cache, rtable} (pool :0000192)`: one line for each
/// merged cache that one of `types` comes from, in the order of `types`.
pub(super) fn merged_cache_lines<'t>(
    report: &Report,
    types: impl IntoIterator<Item = &'t TypeProfile>,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut done: Vec<&str> = Vec::new();
    for cache in types.into_iter().filter_map(|t| t.cache.as_deref()) {
        let Some(m) = report
            .profile
            .merged_caches
            .iter()
            .find(|m| m.cache == cache)
        else {
            continue;
        };
        if done.contains(&cache) {
            continue;
        }
        done.push(cache);
        writeln!(
            out,
            "merged caches: {} = {{{}}} (pool {})",
            m.cache,
            m.aliases.join(", "),
            m.pool
        )?;
    }
    Ok(())
}

pub(super) fn more(out: &mut impl Write, len: usize, top: usize, what: &str) -> io::Result<()> {
    if len > top {
        writeln!(out, "... {} more {what} (--top N shows more)", len - top)?;
    }
    Ok(())
}

/// Milliseconds from the working set's first time, the profile's start.
pub(super) fn since_start(ws: &WorkingSetReport, t: u64) -> String {
    let start = ws.times_ns.first().copied().unwrap_or(0);
    format!("{:.3} ms", t.saturating_sub(start) as f64 / 1e6)
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}
