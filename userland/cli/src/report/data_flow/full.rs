//! The data flow view's section for a type watched over its whole object (`--histories
//! full:TYPE`): its history sets, how fast the merged paths converged, what each round of
//! collection cost, and the merged paths step by step.

use std::io::{self, Write};

use dprof_model::histories::{FullCoverage, MergedPath, SetCost};

use super::arrows::{instruction_label, CPU_CHANGE};
use super::outcome::sampled_cell;
use crate::report::output::Table;

pub(super) fn text(f: &FullCoverage, top: usize, out: &mut impl Write) -> io::Result<()> {
    let chunks: Vec<String> = f.chunks.iter().map(ToString::to_string).collect();
    writeln!(
        out,
        "Whole object (--histories full): {} history sets of {} targets, {} chunks of {} bytes \
         ({})",
        f.sets,
        f.targets,
        f.chunks.len(),
        f.object_size,
        chunks.join(" ")
    )?;
    writeln!(
        out,
        "sets matched from {} rounds of one complete history per target{}, each target's \
         history the one that agrees with the set on the most chunks; {} complete histories \
         unused",
        f.rounds,
        if f.incomplete_rounds > 0 {
            format!(" (and {} incomplete)", f.incomplete_rounds)
        } else {
            String::new()
        },
        f.unmatched_histories
    )?;
    writeln!(
        out,
        "merge: {} of {} histories left out (their accesses to a chunk differ from the chunk's \
         reference), {} ordering cycles broken by time",
        f.unmerged_histories,
        f.sets * f.targets,
        f.cycles_broken
    )?;
    if f.sets > 0 {
        writeln!(
            out,
            "distinct paths after 1..{} sets: {}; no new path in the last {} sets",
            f.sets,
            f.curve(),
            f.sets_without_new_path()
        )?;
    }
    writeln!(out)?;
    cost_text(f, top, out)?;
    for (i, path) in f.paths.iter().take(top).enumerate() {
        path_text(i + 1, path, out)?;
    }
    if f.paths.len() > top {
        writeln!(
            out,
            "... {} more merged paths (--top N shows more)",
            f.paths.len() - top
        )?;
    }
    Ok(())
}

fn cost_text(f: &FullCoverage, top: usize, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Cost per round (a target's failed tries count in its round):"
    )?;
    let mut table = Table::new(&[
        ("round", false),
        ("histories", true),
        ("complete", true),
        ("hits", true),
        ("wall", true),
    ]);
    let row = |label: String, c: &SetCost| {
        vec![
            label,
            c.histories.to_string(),
            c.complete_histories.to_string(),
            c.hits.to_string(),
            format!("{} ns", c.wall_ns),
        ]
    };
    for c in f.cost.iter().take(top) {
        let label = if c.complete {
            c.set.to_string()
        } else {
            format!("{} (incomplete)", c.set)
        };
        table.row(row(label, c));
    }
    table.row(row("total".to_owned(), &f.total_cost));
    table.write(out)?;
    if f.cost.len() > top {
        writeln!(
            out,
            "... {} more rounds (--top N shows more)",
            f.cost.len() - top
        )?;
    }
    if let (Some(histories), Some(hits), Some(wall)) = (
        f.mean_histories_per_set(),
        f.mean_hits_per_set(),
        f.mean_wall_ns_per_set(),
    ) {
        writeln!(
            out,
            "per merged set: {histories:.1} histories, {hits:.1} hits, {wall} ns"
        )?;
    }
    writeln!(out)
}

fn path_text(n: usize, path: &MergedPath, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Merged path {n}: {} sets ({:.1}%), {} to {}",
        path.sets,
        path.share * 100.0,
        path.alloc_function,
        path.end
    )?;
    let mut table = Table::new(&[
        ("", false),
        ("since alloc", true),
        ("instruction", false),
        ("chunk", false),
        ("access", false),
        ("cpu", true),
        ("sampled", false),
    ]);
    for s in &path.steps {
        table.row(vec![
            if s.cpu_change { CPU_CHANGE } else { "" }.to_owned(),
            format!("{} ns", s.mean_since_alloc_ns),
            instruction_label(&s.function, s.function_offset, s.instruction_found),
            s.chunk.with_field(s.field.as_deref()),
            s.kind.map_or("?", |k| k.name()).to_owned(),
            s.cpu.to_string(),
            sampled_cell(s.sampled.as_ref()),
        ]);
    }
    table.row(vec![
        if path.end_cpu_change { CPU_CHANGE } else { "" }.to_owned(),
        String::new(),
        format!("freed by {}", path.end),
        String::new(),
        String::new(),
        path.end_cpu.to_string(),
        String::new(),
    ]);
    table.write(out)?;
    writeln!(out)
}
