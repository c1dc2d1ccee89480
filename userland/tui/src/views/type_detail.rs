//! One type: what it is, its bytes as a heat strip, and its offsets, functions and CPUs.

use dprof_model::{Report, TypeHardware, TypeKind, TypeProfile};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Block, Borders, Cell, HighlightSpacing, Paragraph, Row, StatefulWidget, Table, TableState,
    Widget,
};

use super::absence;
use super::heat_strip::{HeatStrip, LINE_BYTES};
use super::style::{ACCENT, DIM, HEADING, SELECTED, WARN};
use super::wrap::wrap;
use crate::app::{field_label, type_label};
use crate::app::{App, ListState, Pane, View};
use crate::format::{bytes, count, percent};

/// From this width the three panes sit side by side; below it only the focused one shows.
const WIDE: u16 = 120;
/// Columns between table columns.
const SPACING: u16 = 2;

pub(super) fn render(app: &App, report: &Report, area: Rect, buf: &mut Buffer) {
    if let Some(absence) = app.absence(View::TypeDetail) {
        absence::render_absence(&absence, " Type ", None, area, buf);
        return;
    }
    let Some(t) = app.selected_type() else {
        let text = format!(
            "no type selected: the filter \"{}\" matches no type (Esc in the Data profile clears it)",
            app.data_profile().filter()
        );
        let lines: Vec<Line> = wrap(&text, usize::from(area.width))
            .into_iter()
            .map(|l| Line::styled(l, WARN))
            .collect();
        Paragraph::new(lines).render(area, buf);
        return;
    };
    let state = app.type_detail();
    let header = header_lines(report, t, usize::from(area.width));
    let strip = HeatStrip::new(&t.fields, t.object_size, state.selected_field(t));
    let header_height = header.len() as u16;
    let room = area.height.saturating_sub(header_height);
    let strip_rows = if t.fields.is_empty() {
        1
    } else {
        (strip.height() as u16).min((room / 3).max(3))
    };
    let [header_area, strip_area, panes_area] = Layout::vertical([
        Constraint::Length(header_height),
        Constraint::Length(strip_rows + 1),
        Constraint::Fill(1),
    ])
    .areas(area);
    Paragraph::new(header).render(header_area, buf);
    let strip_title = if t.fields.is_empty() {
        " Heat ".to_owned()
    } else {
        let per_cell = strip.bytes_per_cell(strip_area.width);
        format!(
            " Heat: samples per byte, {per_cell} byte{} per cell, {LINE_BYTES}-byte lines ",
            if per_cell == 1 { "" } else { "s" }
        )
    };
    let block = Block::new()
        .borders(Borders::TOP)
        .title(strip_title)
        .border_style(DIM);
    let inner = block.inner(strip_area);
    block.render(strip_area, buf);
    if t.fields.is_empty() {
        Paragraph::new(Line::styled(
            "no sample touched this type: it was allocated, never sampled",
            DIM,
        ))
        .render(inner, buf);
    } else {
        (&strip).render(inner, buf);
    }
    if panes_area.width >= WIDE {
        let areas = Layout::horizontal([
            Constraint::Percentage(45),
            Constraint::Percentage(35),
            Constraint::Percentage(20),
        ])
        .spacing(1)
        .split(panes_area);
        for (pane, &pane_area) in Pane::ALL.iter().zip(areas.iter()) {
            render_pane(app, t, *pane, pane_title(app, *pane, false), pane_area, buf);
        }
    } else {
        let pane = state.pane();
        render_pane(app, t, pane, pane_title(app, pane, true), panes_area, buf);
    }
}

/// What the type is, its samples, objects and, with a hardware sampler, misses.
fn header_lines(report: &Report, t: &TypeProfile, width: usize) -> Vec<Line<'static>> {
    let what = t.description();
    let mut lines = vec![Line::from(vec![
        Span::styled(type_label(t), HEADING),
        Span::raw(format!(" · {}", what.join(" · "))),
    ])];
    let mut text = vec![format!(
        "{} samples ({} of resolved): reads {}, writes {}, read-modify-writes {}",
        t.samples,
        percent(t.samples, report.data_profile.resolved_samples),
        t.reads,
        t.writes,
        t.read_writes
    )];
    let unit = t.kind.instances();
    let mut objects = vec![format!(
        "{unit} touched {}, from more than one CPU {} (bounce: {})",
        t.objects,
        t.bounced_objects,
        if t.bounce { "yes" } else { "no" }
    )];
    if t.kind == TypeKind::Slab {
        objects.push(format!(
            "allocations {}, frees {}",
            count(t.allocs),
            count(t.frees)
        ));
        objects.push(format!(
            "peak {} objects, {}",
            count(t.peak_live_objects),
            t.peak_live_bytes.map_or_else(|| "-".to_owned(), bytes)
        ));
    }
    text.push(objects.join(" · "));
    if let Some(h) = &t.hardware {
        text.push(hardware_text(report, h));
    }
    for line in text {
        lines.extend(wrap(&line, width).into_iter().map(Line::from));
    }
    lines
}

fn hardware_text(report: &Report, h: &TypeHardware) -> String {
    let (sampler, all_misses) = report
        .data_profile
        .hardware
        .as_ref()
        .map_or(("hardware".to_owned(), 0), |s| {
            (s.samplers.join("+").to_ascii_uppercase(), s.misses)
        });
    let latency = h.mean_latency_cycles.map_or_else(
        || "no latencies".to_owned(),
        |m| format!("mean latency {m:.1} cycles"),
    );
    let sources: Vec<String> = h
        .sources
        .iter()
        .map(|c| format!("{} {}", c.source.name(), percent(c.samples, h.samples)))
        .collect();
    format!(
        "{sampler}: {} samples with hit/miss data, {} missed L1 ({}; {} of all misses) · HITM {} \
         · {latency} · sources: {}",
        h.samples,
        h.misses,
        percent(h.misses, h.samples),
        percent(h.misses, all_misses),
        h.hitm,
        if sources.is_empty() {
            "-".to_owned()
        } else {
            sources.join(", ")
        }
    )
}

/// ` Offsets · by samples ▼ `; with `all`, every pane's name with the focused one marked
/// (the narrow layout shows one pane at a time).
fn pane_title(app: &App, pane: Pane, all: bool) -> Line<'static> {
    let state = app.type_detail();
    let focused = state.pane();
    let (sort, descending) = state.sort(pane);
    let name_style = |p: Pane| {
        if p == focused {
            ACCENT.add_modifier(ratatui::style::Modifier::BOLD)
        } else {
            Style::new()
        }
    };
    let mut spans = vec![Span::raw(" ")];
    if all {
        for (i, p) in Pane::ALL.iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(" │ ", DIM));
            }
            spans.push(Span::styled(p.title(), name_style(*p)));
        }
        spans.push(Span::styled(" (←→)", DIM));
    } else {
        spans.push(Span::styled(pane.title(), name_style(pane)));
    }
    spans.push(Span::styled(
        format!(
            " · by {} {} ",
            sort.name(pane),
            if descending { "▼" } else { "▲" }
        ),
        DIM,
    ));
    Line::from(spans)
}

fn render_pane(
    app: &App,
    t: &TypeProfile,
    pane: Pane,
    title: Line<'static>,
    area: Rect,
    buf: &mut Buffer,
) {
    let block = Block::new()
        .borders(Borders::TOP)
        .title(title)
        .border_style(DIM);
    let inner = block.inner(area);
    block.render(area, buf);
    let state = app.type_detail();
    let rows = state.rows(pane);
    let (headers, cells) = match pane {
        Pane::Offsets => offset_rows(t, rows),
        Pane::Functions => function_rows(t, rows),
        Pane::Cpus => cpu_rows(t, rows, inner.width),
    };
    if cells.is_empty() {
        Paragraph::new(Line::styled("none sampled", DIM)).render(inner, buf);
        return;
    }
    table(
        &headers,
        cells,
        state.list(pane),
        pane == state.pane(),
        inner,
        buf,
    );
}

/// Headings (with whether the column is numeric) and cells of a pane.
type PaneRows = (Vec<(&'static str, bool)>, Vec<Vec<String>>);

fn offset_rows(t: &TypeProfile, rows: &[usize]) -> PaneRows {
    let hw = t.hardware.is_some();
    let named = t.fields.iter().any(|f| f.field.is_some());
    let mut headers = vec![
        ("offset", false),
        ("size", true),
        ("samples", true),
        ("share", true),
        ("R", true),
        ("W", true),
        ("RW", true),
    ];
    if hw {
        headers.insert(3, ("misses", true));
    }
    let cells = rows
        .iter()
        .map(|&i| {
            let f = &t.fields[i];
            let mut row = vec![
                if named {
                    field_label(f)
                } else {
                    format!("+{:#x}", f.offset)
                },
                if f.size == 0 {
                    "-".to_owned()
                } else {
                    f.size.to_string()
                },
                f.samples.to_string(),
                percent(f.samples, t.samples),
                f.reads.to_string(),
                f.writes.to_string(),
                f.read_writes.to_string(),
            ];
            if hw {
                row.insert(3, f.misses.unwrap_or(0).to_string());
            }
            row
        })
        .collect();
    (headers, cells)
}

fn function_rows(t: &TypeProfile, rows: &[usize]) -> PaneRows {
    let hw = t.hardware.is_some();
    let mut headers = vec![
        ("function", false),
        ("samples", true),
        ("share", true),
        ("R", true),
        ("W", true),
        ("RW", true),
    ];
    if hw {
        headers.insert(2, ("misses", true));
    }
    let cells = rows
        .iter()
        .map(|&i| {
            let f = &t.functions[i];
            let mut row = vec![
                f.function.clone(),
                f.samples.to_string(),
                percent(f.samples, t.samples),
                f.reads.to_string(),
                f.writes.to_string(),
                f.read_writes.to_string(),
            ];
            if hw {
                row.insert(2, f.misses.unwrap_or(0).to_string());
            }
            row
        })
        .collect();
    (headers, cells)
}

/// CPUs with a bar of their samples across what is left of the pane.
fn cpu_rows(t: &TypeProfile, rows: &[usize], width: u16) -> PaneRows {
    let headers = vec![
        ("cpu", true),
        ("samples", true),
        ("share", true),
        ("", false),
    ];
    let most = t.cpus.iter().map(|c| c.samples).max().unwrap_or(0);
    // The marker, three columns of numbers and the spacing between the four columns.
    let bar_width = usize::from(width).saturating_sub(2 + 3 + 7 + 6 + 3 * 2);
    let cells = rows
        .iter()
        .map(|&i| {
            let c = &t.cpus[i];
            let bar = if most == 0 {
                0
            } else {
                (c.samples as usize * bar_width).div_ceil(most as usize)
            };
            vec![
                c.cpu.to_string(),
                c.samples.to_string(),
                percent(c.samples, t.samples),
                "█".repeat(bar),
            ]
        })
        .collect();
    (headers, cells)
}

/// A pane's table: numbers right-aligned; the first text column takes what the numbers
/// leave.
fn table(
    headers: &[(&str, bool)],
    cells: Vec<Vec<String>>,
    list: &ListState,
    focused: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let marker = "▶ ";
    let mut widths: Vec<u16> = headers
        .iter()
        .enumerate()
        .map(|(col, (h, _))| {
            cells
                .iter()
                .map(|row| row[col].chars().count())
                .chain(std::iter::once(h.chars().count()))
                .max()
                .unwrap_or(0) as u16
        })
        .collect();
    let available = area.width.saturating_sub(marker.chars().count() as u16);
    let others: u16 = widths.iter().skip(1).map(|w| w + SPACING).sum();
    widths[0] = widths[0].min(available.saturating_sub(others).max(8));
    let cell = |numeric: bool, text: String| {
        let line = if numeric {
            Line::from(text).right_aligned()
        } else {
            Line::from(text)
        };
        Cell::from(Text::from(line))
    };
    let header = Row::new(
        headers
            .iter()
            .map(|&(h, numeric)| cell(numeric, h.to_owned()).style(HEADING)),
    );
    let body = cells.into_iter().map(|row| {
        Row::new(
            row.into_iter()
                .zip(headers)
                .map(|(text, &(_, numeric))| cell(numeric, text))
                .collect::<Vec<_>>(),
        )
    });
    let table = Table::new(body, widths.iter().map(|&w| Constraint::Length(w)))
        .header(header)
        .column_spacing(SPACING)
        .row_highlight_style(if focused { SELECTED } else { Style::new() })
        .highlight_symbol(if focused { marker } else { "  " })
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::new()
        .with_offset(list.scroll())
        .with_selected(Some(list.selected()));
    StatefulWidget::render(table, area, buf, &mut state);
    list.set_scroll(state.offset());
}
