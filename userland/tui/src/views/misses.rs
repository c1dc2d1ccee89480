//! The miss classification: the slab types, and for the selected one its samples (misses with
//! a hardware sampler) by class as bars, the dominant class, and the evidence: sharing pairs
//! from histories, accesses to lines shared with a neighbour, flagged sets per level, the
//! capacity numbers; then what the view could not see.
//!
//! Wide, the types sit left of the selected type's classes and evidence; narrow, above them.

use dprof_model::misses::{MissClass, MissReport, SharingSite, TypeMisses};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::widgets::Widget;

use super::absence;
use super::cache_views::{frame, geometry_text, note_lines, render_lines, type_table};
use super::style::{ACCENT, DIM, HEADING, WARN};
use super::wrap::{wrap, wrap_at_most};
use crate::app::{App, View};
use crate::format::bytes;

/// From this width the types and the selected type's evidence sit side by side.
const WIDE: u16 = 120;
/// The widest a class bar gets.
const MAX_BAR: usize = 40;
/// Flagged sets listed before `…`.
const SETS_SHOWN: usize = 8;

/// The glyph of each class in the one-line bar of narrow screens (told apart without colour).
const fn class_glyph(class: MissClass) -> char {
    match class {
        MissClass::TrueSharing => '█',
        MissClass::FalseSharing => '▓',
        MissClass::Conflict => '▒',
        MissClass::Capacity => '░',
        MissClass::CannotTell => '╳',
        MissClass::Unclassified => '·',
    }
}

/// The colour of each class's bar.
const fn class_style(class: MissClass) -> Style {
    Style::new().fg(match class {
        MissClass::TrueSharing => Color::Red,
        MissClass::FalseSharing => Color::Magenta,
        MissClass::Conflict => Color::Yellow,
        MissClass::Capacity => Color::Blue,
        MissClass::CannotTell => Color::Cyan,
        MissClass::Unclassified => Color::DarkGray,
    })
}

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let (Some(m), Some(name)) = (
        app.report().and_then(|r| r.misses.as_ref()),
        app.view_type(View::MissClassification),
    ) else {
        absence::render(app, area, buf);
        return;
    };
    let Some(t) = m.find_type(name) else {
        absence::render(app, area, buf);
        return;
    };
    let title = if m.inferred {
        format!(" Misses · {} · inferred ", t.name)
    } else {
        format!(" Misses · {} ", t.name)
    };
    let inner = frame(&title, area, buf);
    let width = usize::from(inner.width);
    let mut top: Vec<Line> = wrap_at_most(&m.basis, width, 2)
        .into_iter()
        .map(|l| Line::styled(l, if m.inferred { WARN } else { DIM }))
        .collect();
    let wide = inner.width >= WIDE;
    if wide {
        top.extend(
            wrap_at_most(&geometry_text(&m.geometry, false), width, 2)
                .into_iter()
                .map(|l| Line::styled(l, DIM)),
        );
    }
    let types_height = if wide {
        0
    } else {
        (m.types.len() as u16 + 1).min(inner.height / 4).max(2)
    };
    let [top_area, types_area, rest] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Length(types_height),
        Constraint::Fill(1),
    ])
    .spacing(0)
    .areas(inner);
    Paragraph::new(top).render(top_area, buf);
    let (types_area, detail_area) = if wide {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(38), Constraint::Percentage(62)])
                .spacing(2)
                .areas(rest);
        (left, right)
    } else {
        (types_area, rest)
    };
    render_types(app, m, types_area, buf);
    let detail_width = usize::from(detail_area.width);
    let mut lines = vec![Line::raw("")];
    lines.extend(detail_lines(m, t, detail_width, wide));
    lines.push(Line::raw(""));
    lines.extend(note_lines(&m.notes, detail_width));
    render_lines(lines, detail_area, buf);
}

/// "samples" or "misses": what was classified.
const fn what(m: &MissReport) -> &'static str {
    if m.inferred {
        "samples"
    } else {
        "misses"
    }
}

fn render_types(app: &App, m: &MissReport, area: Rect, buf: &mut Buffer) {
    let rows = m
        .types
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.total.to_string(),
                if t.total == 0 {
                    "-".to_owned()
                } else {
                    format!("{} +{:.1}", t.dominant.name(), t.margin)
                },
            ]
        })
        .collect();
    type_table(
        &[("type", false), (what(m), true), ("dominant", false)],
        rows,
        app.misses().list(),
        area,
        buf,
    );
}

/// The classes as bars, the dominant class, and the evidence.
fn detail_lines(m: &MissReport, t: &TypeMisses, width: usize, wide: bool) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if t.total == 0 {
        lines.push(Line::styled(
            format!(
                "no {} of {} to classify: its sharing comes from histories only",
                what(m),
                t.name
            ),
            DIM,
        ));
    } else {
        lines.push(Line::from(vec![
            Span::styled(format!("{} {}", t.total, what(m)), HEADING),
            Span::raw(" · dominant "),
            Span::styled(t.dominant.name(), class_style(t.dominant)),
            Span::raw(format!(", by {:.1} points", t.margin)),
        ]));
        if wide {
            lines.extend(class_bars(t, width));
        } else {
            lines.extend(stacked_bar(t, width));
        }
    }
    lines.push(Line::raw(""));
    lines.extend(history_lines(m, t, width));
    lines.extend(set_lines(m, t, width));
    lines
}

/// One row per class: its name, a bar as long as its share, the share.
fn class_bars(t: &TypeMisses, width: usize) -> Vec<Line<'static>> {
    const NAME: usize = 14;
    let bar_room = width.saturating_sub(NAME + 8).min(MAX_BAR);
    MissClass::ALL
        .iter()
        .map(|&class| {
            let percent = t
                .classes
                .iter()
                .find(|c| c.class == class)
                .map_or(0.0, |c| c.percent);
            let eighths = (percent / 100.0 * bar_room as f64 * 8.0).round() as usize;
            let bar = bar_text(eighths);
            let pad = bar_room.saturating_sub(bar.chars().count());
            Line::from(vec![
                Span::raw(format!("{:<NAME$}", class.name())),
                Span::styled(bar, class_style(class)),
                Span::raw(" ".repeat(pad)),
                Span::styled(format!(" {percent:>5.1}%"), DIM),
            ])
        })
        .collect()
}

/// The classes in one bar `width` cells long, each class its glyph and colour, then a legend
/// of the classes present, largest first.
fn stacked_bar(t: &TypeMisses, width: usize) -> Vec<Line<'static>> {
    let cells = cell_shares(
        &MissClass::ALL.map(|c| t.count(c).max(0.0)),
        width.min(MAX_BAR * 2),
    );
    let bar: Vec<Span> = MissClass::ALL
        .iter()
        .zip(cells)
        .filter(|&(_, n)| n > 0)
        .map(|(&class, n)| {
            Span::styled(class_glyph(class).to_string().repeat(n), class_style(class))
        })
        .collect();
    let mut present: Vec<(MissClass, f64)> = t
        .classes
        .iter()
        .filter(|c| c.count > 0.0)
        .map(|c| (c.class, c.percent))
        .collect();
    present.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut lines = vec![Line::from(bar)];
    // The legend, items kept whole, as many lines as they need.
    let mut legend: Vec<Span> = Vec::new();
    let mut used = 0;
    for (class, percent) in present {
        let text = format!(" {} {percent:.1}%", class.name());
        let item = 1 + text.chars().count();
        let gap = if used == 0 { 0 } else { LEGEND_GAP.len() };
        if used > 0 && used + gap + item > width {
            lines.push(Line::from(std::mem::take(&mut legend)));
            used = 0;
        } else if used > 0 {
            legend.push(Span::raw(LEGEND_GAP));
            used += gap;
        }
        legend.push(Span::styled(
            class_glyph(class).to_string(),
            class_style(class),
        ));
        legend.push(Span::raw(text));
        used += item;
    }
    if !legend.is_empty() {
        lines.push(Line::from(legend));
    }
    lines
}

/// Between the legend's items.
const LEGEND_GAP: &str = "   ";

/// `width` cells shared out in proportion to `counts`, largest remainders first, adding up to
/// `width` (nothing when every count is 0).
fn cell_shares<const N: usize>(counts: &[f64; N], width: usize) -> [usize; N] {
    let total: f64 = counts.iter().sum();
    let mut cells = [0usize; N];
    if total <= 0.0 {
        return cells;
    }
    let exact = counts.map(|c| c / total * width as f64);
    for (cell, e) in cells.iter_mut().zip(exact) {
        *cell = e.floor() as usize;
    }
    let mut order: Vec<usize> = (0..N).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let short = width.saturating_sub(cells.iter().sum());
    for &i in order.iter().take(short) {
        cells[i] += 1;
    }
    cells
}

/// A bar `eighths`/8 cells long, from full blocks and one partial block.
fn bar_text(eighths: usize) -> String {
    const PARTIAL: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let mut bar = "█".repeat(eighths / 8);
    bar.push_str(PARTIAL[eighths % 8]);
    bar
}

/// `vw_write_b +0x8/8 counter_b cpu1`.
fn site(s: &SharingSite) -> String {
    match &s.field {
        Some(f) => format!(
            "{} +{:#x}/{} {f} cpu{}",
            s.function, s.offset, s.size, s.cpu
        ),
        None => format!("{} +{:#x}/{} cpu{}", s.function, s.offset, s.size, s.cpu),
    }
}

/// The history judgement, the sharing pairs and the cannot-tell accesses.
fn history_lines(m: &MissReport, t: &TypeMisses, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let judged = match &t.history_accesses {
        Some(h) => format!(
            "history accesses judged: {}: {} true sharing, {} false sharing, {} cannot tell, \
             the rest no invalidation",
            h.accesses, h.true_sharing, h.false_sharing, h.cannot_tell
        ),
        None => format!(
            "no histories of {}: sharing cannot be seen (collect --histories); its {} can only \
             be conflict, capacity or unclassified",
            t.name,
            what(m)
        ),
    };
    lines.extend(wrap(&judged, width).into_iter().map(Line::from));
    if !t.sharing.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "Sharing: a write, then an access on another CPU it invalidated",
            HEADING,
        ));
        for e in &t.sharing {
            let class = match e.class {
                MissClass::TrueSharing => "true ",
                _ => "false",
            };
            lines.push(Line::from(vec![
                Span::styled(class, class_style(e.class)),
                Span::raw(format!(" {:>4}  ", e.count)),
                Span::raw(site(&e.writer)),
                Span::styled(" → ", ACCENT),
                Span::raw(site(&e.missing)),
            ]));
        }
    }
    if !t.cannot_tell.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "Cannot tell: the line holds a neighbour object the history cannot see",
            HEADING,
        ));
        for e in &t.cannot_tell {
            lines.push(Line::from(vec![
                Span::raw(format!("{:>4}  {}", e.count, site(&e.missing))),
                Span::styled(format!("  neighbour {}", e.neighbour_type), DIM),
            ]));
        }
    }
    lines.push(Line::raw(""));
    lines
}

/// Conflict (flagged sets per level) and capacity.
fn set_lines(m: &MissReport, t: &TypeMisses, width: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = Vec::new();
    if m.geometry.is_empty() {
        lines.extend(
            wrap(
                "no cache geometry: conflict and capacity cannot be judged (dprof tui --cache \
                 L1d=SIZE/WAYS/LINE,... gives one)",
                width,
            )
            .into_iter()
            .map(|l| Line::styled(l, WARN)),
        );
        return lines;
    }
    if t.conflict.is_empty() {
        lines.push(Line::raw("conflict: no set flagged at any level"));
    }
    for c in &t.conflict {
        let mut sets: Vec<String> = c
            .flagged_sets
            .iter()
            .take(SETS_SHOWN)
            .map(u64::to_string)
            .collect();
        if c.flagged_sets.len() > SETS_SHOWN {
            sets.push("…".to_owned());
        }
        let text = format!(
            "conflict at {}: {} flagged sets ({}) hold {} of its lines; {:.1} {} there",
            c.level,
            c.flagged_sets.len(),
            sets.join(", "),
            c.lines_in_flagged_sets,
            c.samples,
            what(m)
        );
        lines.extend(
            wrap(&text, width)
                .into_iter()
                .map(|l| Line::styled(l, class_style(MissClass::Conflict))),
        );
    }
    let capacity = match &t.capacity {
        Some(c) => format!(
            "capacity at {}: the sampled types' working set, {}, exceeds its {} and the \
             type's lines reach {:.1}% of its sets",
            c.level,
            bytes(c.working_set_bytes),
            bytes(c.cache_bytes),
            c.sets_covered_fraction * 100.0
        ),
        None => "capacity: no level whose working set it exceeds with its lines spread over \
                 most sets"
            .to_owned(),
    };
    lines.extend(wrap(&capacity, width).into_iter().map(Line::from));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_eighths_of_a_cell() {
        assert_eq!(bar_text(0), "");
        assert_eq!(bar_text(8), "█");
        assert_eq!(bar_text(12), "█▌");
    }

    #[test]
    fn cells_add_up_to_the_width() {
        assert_eq!(cell_shares(&[1.0, 2.0, 1.0], 8), [2, 4, 2]);
        assert_eq!(cell_shares(&[1.0, 1.0, 1.0], 10), [4, 3, 3]);
        assert_eq!(cell_shares(&[0.0, 0.0], 10), [0, 0]);
        assert_eq!(cell_shares(&[0.5, 7.0, 4.0], 40).iter().sum::<usize>(), 40);
    }
}
