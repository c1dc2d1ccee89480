//! The data profile: the profile's line, the coverage line, the hardware line, and the table
//! of types.

use dprof_model::{HardwareSummary, Metric, Report};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Cell, HighlightSpacing, Paragraph, Row, StatefulWidget, Table, TableState, Widget,
};

use super::absence;
use super::style::{ACCENT, DIM, HEADING, SELECTED, WARN};
use super::wrap::wrap_at_most;
use crate::app::{App, Column, View};
use crate::format::{grouped, percent};

/// Columns between table columns.
const SPACING: u16 = 2;
/// The selected row's marker.
const MARKER: &str = "▶ ";
/// The widest the type column gets.
const MAX_TYPE_WIDTH: u16 = 40;

pub(super) fn render(app: &App, report: &Report, area: Rect, buf: &mut Buffer) {
    if let Some(absence) = app.absence(View::DataProfile) {
        absence::render_absence(&absence, " Data profile ", None, area, buf);
        return;
    }
    let width = usize::from(area.width);
    let p = &report.profile;
    let mut top: Vec<Line> = vec![Line::from(vec![
        Span::styled(format!("kernel {}", p.kernel_release), HEADING),
        Span::raw(format!(" · {} CPUs · {}", p.online_cpus, p.cpu_model)),
    ])];
    // The coverage line can be long: it gets at most a quarter of the screen.
    let coverage_lines = usize::from(area.height / 4).max(2);
    top.extend(
        wrap_at_most(
            &format!("coverage: {}", report.coverage.summary),
            width,
            coverage_lines,
        )
        .into_iter()
        .map(Line::from),
    );
    if let Some(hw) = &report.data_profile.hardware {
        top.extend(
            wrap_at_most(&hardware_line(hw), width, 2)
                .into_iter()
                .map(|l| Line::styled(l, DIM)),
        );
    }
    top.push(title_line(app, report));
    top.extend(unsampled_line(report));
    top.extend(filter_line(app, report));
    let warnings = warning_lines(app, width);
    let [top_area, table_area, warn_area] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Fill(1),
        Constraint::Length(warnings.len() as u16),
    ])
    .areas(area);
    Paragraph::new(top).render(top_area, buf);
    table(app, report, table_area, buf);
    Paragraph::new(warnings).render(warn_area, buf);
}

/// The profile-wide hardware statistics in one sentence.
fn hardware_line(hw: &HardwareSummary) -> String {
    let latency = hw.mean_latency_cycles.map_or_else(
        || "no latencies".to_owned(),
        |m| format!("mean latency {m:.1} cycles"),
    );
    format!(
        "{}: {} samples, {} with hit/miss data: {} missed L1 ({}) · HITM {} · {latency}",
        hw.samplers.join("+").to_ascii_uppercase(),
        grouped(hw.samples),
        grouped(hw.resolved_samples),
        grouped(hw.misses),
        percent(hw.misses, hw.resolved_samples),
        grouped(hw.hitm),
    )
}

/// `9 types ranked by samples (...) · sorted by rank ▲`.
fn title_line(app: &App, report: &Report) -> Line<'static> {
    let dp = &report.data_profile;
    let state = app.data_profile();
    let ranked = match dp.metric {
        Metric::Samples => "ranked by samples (software sampler: no miss data)",
        Metric::Misses => "ranked by L1 data-cache misses",
    };
    let (sort, descending) = state.sort();
    let spans = vec![
        Span::styled(format!("{} types", dp.types.len()), HEADING),
        Span::raw(format!(" {ranked}")),
        Span::styled(
            format!(" · sorted by {} {}", sort.header(), arrow(descending)),
            DIM,
        ),
    ];
    Line::from(spans)
}

/// How many types were only allocated and are not listed, under the title when some were.
fn unsampled_line(report: &Report) -> Option<Line<'static>> {
    match report.data_profile.unsampled_types {
        0 => None,
        n => Some(Line::styled(
            format!(
                "{n} {} only allocated, never sampled, not listed: see Working set",
                if n == 1 { "type" } else { "types" }
            ),
            DIM,
        )),
    }
}

/// `filter "km": 3 of 9 types (Esc clears it)`, under the title while a filter is set.
fn filter_line(app: &App, report: &Report) -> Option<Line<'static>> {
    let state = app.data_profile();
    (!state.filter().is_empty()).then(|| {
        Line::styled(
            format!(
                "filter \"{}\": {} of {} types (Esc clears it)",
                state.filter(),
                state.rows().len(),
                report.data_profile.types.len()
            ),
            ACCENT,
        )
    })
}

const fn arrow(descending: bool) -> &'static str {
    if descending {
        "▼"
    } else {
        "▲"
    }
}

/// The warnings, at most two lines and a count of the rest.
fn warning_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let warnings = app.warnings();
    let mut lines: Vec<Line> = warnings
        .iter()
        .take(2)
        .map(|w| {
            let text = wrap_at_most(&format!("warning: {w}"), width, 1)
                .into_iter()
                .next()
                .unwrap_or_default();
            Line::styled(text, WARN)
        })
        .collect();
    if warnings.len() > 2 {
        lines.push(Line::styled(
            format!("... and {} more warnings", warnings.len() - 2),
            WARN,
        ));
    }
    lines
}

fn table(app: &App, report: &Report, area: Rect, buf: &mut Buffer) {
    let dp = &report.data_profile;
    let state = app.data_profile();
    let rows = state.rows();
    if rows.is_empty() {
        let text = format!(
            "no type matches \"{}\" (Esc clears the filter)",
            state.filter()
        );
        Paragraph::new(Line::styled(text, WARN)).render(area, buf);
        return;
    }
    let (sort, descending) = state.sort();
    let columns = state.columns();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|&i| columns.iter().map(|c| c.cell(&dp.types[i], dp)).collect())
        .collect();
    let headers: Vec<String> = columns
        .iter()
        .map(|&c| {
            if c == sort {
                format!("{} {}", c.header(), arrow(descending))
            } else {
                c.header().to_owned()
            }
        })
        .collect();
    let widths: Vec<u16> = (0..columns.len())
        .map(|col| {
            cells
                .iter()
                .map(|row| row[col].chars().count())
                .chain(std::iter::once(headers[col].chars().count()))
                .max()
                .unwrap_or(0) as u16
        })
        .collect();
    let mut widths = widths;
    if let Some(type_col) = columns.iter().position(|&c| c == Column::Type) {
        // Long names (kmalloc-rnd-01-192@a_long_function) are cut rather than crowd out
        // the numbers.
        widths[type_col] = widths[type_col].min(MAX_TYPE_WIDTH);
    }
    let by_misses = dp.hardware.is_some();
    let available = area.width.saturating_sub(MARKER.chars().count() as u16);
    let kept = fit(&widths, available, |col| {
        if columns[col] == sort {
            // The column sorted by stays: it is why the rows are in this order.
            u8::MAX - 1
        } else {
            columns[col].keep_priority(by_misses)
        }
    });
    let cell = |col: usize, text: String| {
        let line = if columns[col].is_numeric() {
            Line::from(text).right_aligned()
        } else if columns[col] == Column::Bounce && text != "no" {
            Line::styled(text, WARN)
        } else {
            Line::from(text)
        };
        Cell::from(Text::from(line))
    };
    let header = Row::new(
        kept.iter()
            .map(|&col| cell(col, headers[col].clone()).style(HEADING)),
    );
    let body = cells.into_iter().map(|mut row| {
        Row::new(
            kept.iter()
                .map(|&col| cell(col, std::mem::take(&mut row[col])))
                .collect::<Vec<_>>(),
        )
    });
    let mut constraints: Vec<Constraint> = kept
        .iter()
        .map(|&col| Constraint::Length(widths[col]))
        .collect();
    // The type column takes what is left when the others do not leave it its width.
    if let Some(type_at) = kept.iter().position(|&col| columns[col] == Column::Type) {
        let others: u16 = kept
            .iter()
            .filter(|&&col| columns[col] != Column::Type)
            .map(|&col| widths[col] + SPACING)
            .sum();
        let left = available.saturating_sub(others);
        if left < widths[kept[type_at]] {
            constraints[type_at] = Constraint::Length(left);
        }
    }
    let table = Table::new(body, constraints)
        .header(header)
        .column_spacing(SPACING)
        .row_highlight_style(SELECTED)
        .highlight_symbol(MARKER)
        .highlight_spacing(HighlightSpacing::Always);
    let mut table_state = TableState::new()
        .with_offset(state.list().scroll())
        .with_selected(Some(state.list().selected()));
    StatefulWidget::render(table, area, buf, &mut table_state);
    state.list().set_scroll(table_state.offset());
}

/// The columns (indices into `widths`) that fit in `available`, dropping the lowest
/// `priority` first (the rightmost among equals); the one with the highest priority always
/// stays.
pub(super) fn fit(widths: &[u16], available: u16, priority: impl Fn(usize) -> u8) -> Vec<usize> {
    let mut kept: Vec<usize> = (0..widths.len()).collect();
    loop {
        let total: u16 = kept.iter().map(|&c| widths[c]).sum::<u16>()
            + SPACING * kept.len().saturating_sub(1) as u16;
        if total <= available || kept.len() <= 1 {
            return kept;
        }
        let Some(drop_at) = kept
            .iter()
            .enumerate()
            .min_by_key(|&(at, &c)| (priority(c), std::cmp::Reverse(at)))
            .map(|(at, _)| at)
        else {
            return kept;
        };
        let best = kept.iter().map(|&c| priority(c)).max().unwrap_or(0);
        if priority(kept[drop_at]) == best {
            return kept;
        }
        kept.remove(drop_at);
    }
}
