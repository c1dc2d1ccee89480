//! `dprof report --view data-flow`: one type's functions from alloc to free, merged over its
//! object access histories, with the path traces under it; for a type watched over its whole
//! object (`--histories full:TYPE`), its merged whole-object paths in place of the pairwise
//! path traces, which `--json` lists.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};
use dprof_model::histories::{
    DataFlow, FlowRange, FlowRole, HistoryReport, PathTrace, TypeHistories,
};
use dprof_model::Report;

use super::args::{Format, ReportArgs, DEFAULT_TOP};
use super::output::Table;

mod arrows;
mod full;
mod outcome;

use arrows::{CPU_CHANGE, SAME_CPU};
use outcome::sampled_cell;

pub(super) fn run(args: &ReportArgs, report: &Report) -> anyhow::Result<ExitCode> {
    let Some(histories) = &report.histories else {
        bail!(
            "{}: no histories collected: run dprof collect --histories auto (after a profile \
             that shows which types to watch) to record object access histories",
            args.file.display()
        );
    };
    let (selected, picked) = match &args.type_name {
        Some(name) => (find_type(histories, name)?, false),
        None => match histories.types.first() {
            Some(t) => (t, true),
            None => bail!(
                "{}: the profile's histories have no type",
                args.file.display()
            ),
        },
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let top = args.top.unwrap_or(DEFAULT_TOP);
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, selected)
            .map_err(io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        match args.format {
            Format::Dot => {
                if picked {
                    writeln!(out, "// {}", picked_note(selected))?;
                }
                // The graph is then a note saying why; the warning tells a person whose
                // standard output goes to `dot` or a file at once.
                if let Some(empty) = &selected.data_flow.why_empty {
                    eprintln!("dprof: warning: {}", empty.message);
                }
                out.write_all(
                    dprof_export::dot::data_flow_dot(&selected.data_flow, selected.full.as_ref())
                        .as_bytes(),
                )
            }
            Format::Text | Format::Csv | Format::Coz => {
                text(histories, selected, picked, top, &mut out)
            }
        }
    }
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other
            .context("cannot write to standard output")
            .map(|()| ExitCode::SUCCESS),
    }
}

fn picked_note(t: &TypeHistories) -> String {
    format!(
        "{} is the type with the most histories ({}); --type NAME shows another",
        t.name, t.histories
    )
}

fn find_type<'r>(histories: &'r HistoryReport, name: &str) -> anyhow::Result<&'r TypeHistories> {
    if let Some(t) = histories.find_type(name) {
        return Ok(t);
    }
    let names: Vec<String> = histories
        .types
        .iter()
        .take(10)
        .map(|t| format!("{} ({})", t.name, t.histories))
        .collect();
    bail!(
        "no histories of type {name:?} in the profile; types with histories: {}",
        names.join(", ")
    );
}

fn text(
    all: &HistoryReport,
    t: &TypeHistories,
    picked: bool,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    if picked {
        writeln!(out, "({})", picked_note(t))?;
    }
    let e = &t.end_reasons;
    let mut ends = vec![format!("{} alloc to free", t.complete)];
    for (n, what) in [
        (e.timeout, "timed out"),
        (e.stopped, "stopped with collection"),
        (e.unfinished, "with no end record"),
    ] {
        if n > 0 {
            ends.push(format!("{n} {what}"));
        }
    }
    writeln!(
        out,
        "Data flow of {}: {} histories ({}), {} hits, {} CPU changes from alloc to free",
        t.name,
        t.histories,
        ends.join(", "),
        t.hits,
        t.data_flow.cpu_changes
    )?;
    let c = &t.convergence;
    writeln!(
        out,
        "paths: {} in {} complete histories, the last new one at history {} (about 30-100 \
         histories find the common paths)",
        c.paths, c.histories, c.last_new_path_at
    )?;
    writeln!(out, "hits: {}", t.checks)?;
    if t.dropped_hits > 0 || t.late_hits > 0 || all.orphan_hits > 0 {
        writeln!(
            out,
            "not seen: {} hits dropped by the module, {} timed after their history's end, {} \
             of histories with no start (profile-wide)",
            t.dropped_hits, t.late_hits, all.orphan_hits
        )?;
    }
    if t.max_arm_delay_ns > 0 {
        writeln!(
            out,
            "other CPUs watched objects up to {} ns after allocation: their accesses before \
             were missed",
            t.max_arm_delay_ns
        )?;
    }
    writeln!(out)?;
    if let Some(empty) = &t.data_flow.why_empty {
        return writeln!(out, "{}", empty.message);
    }
    graph(&t.data_flow, out)?;
    writeln!(out)?;
    for order in &t.field_orders {
        writeln!(
            out,
            "field order: {} before {} in {} of {} pairwise histories ({} the other way, {} \
             touched one or neither)",
            order.first.with_field(order.first_field.as_deref()),
            order.second.with_field(order.second_field.as_deref()),
            order.first_before_second,
            order.histories,
            order.second_before_first,
            order.one_or_none
        )?;
    }
    if !t.field_orders.is_empty() {
        writeln!(out)?;
    }
    // Watched whole, a type has a path per target and way through its chunks, each a part of
    // the object's path: the merged paths are the answer.
    if let Some(whole) = &t.full {
        writeln!(
            out,
            "{} path traces, each the part of the path one target's chunks saw, are merged \
             below; --json lists them (paths)",
            t.paths.len()
        )?;
        writeln!(out)?;
        return full::text(whole, top, out);
    }
    for (i, path) in t.paths.iter().take(top).enumerate() {
        path_text(i + 1, path, out)?;
    }
    if t.paths.len() > top {
        writeln!(
            out,
            "... {} more paths (--top N shows more)",
            t.paths.len() - top
        )?;
    }
    Ok(())
}

/// Nodes from alloc (top) to free (bottom), each with its steps to the next functions.
fn graph(flow: &DataFlow, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Functions from alloc to free ({} histories; {SAME_CPU} same CPU, {CPU_CHANGE} the \
         object moved to another CPU):",
        flow.histories
    )?;
    for node in &flow.nodes {
        let role = match node.role {
            FlowRole::Alloc => " [alloc]",
            FlowRole::Free => " [free]",
            FlowRole::AllocAndFree => " [alloc, free]",
            FlowRole::Access => "",
        };
        let unknown = if node.unknown_kind > 0 {
            format!(", unknown {}", node.unknown_kind)
        } else {
            String::new()
        };
        let cost = node
            .sampled
            .as_ref()
            .map_or_else(String::new, |s| match s.misses {
                Some(m) => format!(", {m} sampled misses"),
                None => format!(", {} samples", s.samples),
            });
        writeln!(
            out,
            "{}{role}  {} histories, reads {}, writes {}, read-writes {}{unknown}{cost}",
            node.function, node.histories, node.reads, node.writes, node.read_writes
        )?;
        if !node.ranges.is_empty() {
            let ranges: Vec<String> = node.ranges.iter().map(FlowRange::summary).collect();
            writeln!(out, "  fields: {}", ranges.join(", "))?;
        }
        for e in flow.edges.iter().filter(|e| e.from == node.function) {
            if e.cpu_changes > 0 {
                writeln!(
                    out,
                    "  {CPU_CHANGE} {}  {} ({} CPU changes)",
                    e.to, e.transitions, e.cpu_changes
                )?;
            } else {
                writeln!(out, "  {SAME_CPU} {}  {}", e.to, e.transitions)?;
            }
        }
    }
    Ok(())
}

fn path_text(n: usize, path: &PathTrace, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Path {n}: {} histories ({:.1}%), {} to {}",
        path.histories,
        path.share * 100.0,
        path.alloc_function,
        path.end
    )?;
    let mut table = Table::new(&[
        ("", false),
        ("since alloc", true),
        ("instruction", false),
        ("range", false),
        ("access", false),
        ("sampled", false),
    ]);
    for e in &path.elements {
        table.row(vec![
            if e.cpu_change { CPU_CHANGE } else { "" }.to_owned(),
            format!("{} ns", e.mean_since_alloc_ns),
            arrows::instruction_label(&e.function, e.function_offset, e.instruction_found),
            e.range.with_field(e.field.as_deref()),
            e.kind.map_or("?", |k| k.name()).to_owned(),
            sampled_cell(e.sampled.as_ref()),
        ]);
    }
    table.row(vec![
        if path.end_cpu_change { CPU_CHANGE } else { "" }.to_owned(),
        String::new(),
        format!("freed by {}", path.end),
        String::new(),
        String::new(),
        String::new(),
    ]);
    table.write(out)?;
    writeln!(out)
}
