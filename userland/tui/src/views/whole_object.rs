//! The data flow pane's part for a type watched over its whole object (`--histories
//! full:TYPE`): its history sets, the distinct merged paths after each set (the convergence
//! curve) and the most frequent merged path, step by step, with what the samples of each
//! step's instruction and chunk say.

use dprof_model::histories::{FullCoverage, MergedPath};
use ratatui::text::{Line, Span};

use super::history_steps;
use super::style::{DIM, HEADING};
use super::wrap::{wrap, wrap_at_most};

/// `5 sets of 6 targets over 4 chunks · 1 incomplete round · 1 history left out of the
/// merge`.
fn sets_text(f: &FullCoverage) -> String {
    let incomplete = if f.incomplete_rounds > 0 {
        format!(" · {} incomplete round", f.incomplete_rounds)
    } else {
        String::new()
    };
    format!(
        "{} sets of {} targets over {} chunks{incomplete} · {} histories left out of the merge",
        f.sets,
        f.targets,
        f.chunks.len(),
        f.unmerged_histories
    )
}

/// `distinct paths after 1..5 sets: 1 1 1 2 2 · none new in the last 1`.
fn curve_text(f: &FullCoverage) -> String {
    format!(
        "distinct paths after 1..{} sets: {} · none new in the last {}",
        f.sets,
        f.curve(),
        f.sets_without_new_path()
    )
}

/// Wide: the sets, the curve, the cost per merged set and the most frequent merged path.
pub(super) fn lines(f: &FullCoverage, width: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = wrap(&sets_text(f), width)
        .into_iter()
        .map(Line::from)
        .collect();
    lines.extend(wrap(&curve_text(f), width).into_iter().map(Line::from));
    if let (Some(histories), Some(wall)) = (f.mean_histories_per_set(), f.mean_wall_ns_per_set()) {
        let cost = format!("each set cost {histories:.1} histories, {wall} ns");
        lines.extend(wrap(&cost, width).into_iter().map(|l| Line::styled(l, DIM)));
    }
    if let Some(path) = f.paths.first() {
        lines.extend(path_lines(path, width));
    }
    lines
}

/// Narrow: the sets and the curve, two lines at most.
pub(super) fn short_lines(f: &FullCoverage, width: usize) -> Vec<Line<'static>> {
    let text = format!(
        "whole object: {} sets · paths after each: {}",
        f.sets,
        f.curve()
    );
    wrap_at_most(&text, width, 2)
        .into_iter()
        .map(Line::from)
        .collect()
}

/// The merged path: a heading, then one line per step with its CPU label and what its
/// samples say, then the free.
fn path_lines(path: &MergedPath, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled("Merged path 1", HEADING),
        Span::raw(format!(
            " · {} sets ({:.1}%) · {} to {}",
            path.sets,
            path.share * 100.0,
            path.alloc_function,
            path.end
        )),
    ])];
    lines.extend(history_steps::merged_path_lines(path, width));
    lines
}
