//! The working set: the slab types, and for the selected one its live objects over time (a
//! sparkline), peak and mean objects and bytes, the lines each cache level holds (from the
//! simulation), and per level the histogram of its distinct lines per associativity set with
//! the conflicted sets marked; the cache geometry and where it came from on top. With `b`,
//! the detail gives way to the cache sets by the types in them ([`render_sets`]).

use dprof_model::working_set::{
    LevelSets, SetHistogram, SetOccupants, TypeWorkingSet, WorkingSetReport,
};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Paragraph, Sparkline, Widget};

use super::absence;
use super::cache_views::{frame, geometry_text, note_lines, render_lines, type_table};
use super::style::{ACCENT, DIM, HEADING, WARN};
use super::wrap::wrap_at_most;
use crate::app::{App, View};
use crate::format::bytes;

/// From this width the types sit left of the selected type's series.
const WIDE: u16 = 120;
/// Flagged sets listed under a histogram before `…`.
const SETS_SHOWN: usize = 4;
/// The narrowest histogram column worth drawing.
const MIN_HISTOGRAM_WIDTH: u16 = 16;

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let (Some(ws), Some(name)) = (
        app.report().and_then(|r| r.working_set.as_ref()),
        app.view_type(View::WorkingSet),
    ) else {
        absence::render(app, area, buf);
        return;
    };
    let Some(t) = ws.find_type(name) else {
        absence::render(app, area, buf);
        return;
    };
    let inner = frame(&format!(" Working set · {} ", t.name), area, buf);
    let width = usize::from(inner.width);
    let wide = inner.width >= WIDE;
    let style = if ws.geometry.is_empty() { WARN } else { DIM };
    let top: Vec<Line> = wrap_at_most(&geometry_text(&ws.geometry, !wide), width, 2)
        .into_iter()
        .map(|l| Line::styled(l, style))
        .collect();
    let types_height = if wide {
        0
    } else {
        (ws.types.len() as u16 + 1).min(inner.height / 5).max(2)
    };
    let [top_area, types_area, rest] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Length(types_height),
        Constraint::Fill(1),
    ])
    .areas(inner);
    Paragraph::new(top).render(top_area, buf);
    let (types_area, detail_area) = if wide {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(34), Constraint::Percentage(66)])
                .spacing(2)
                .areas(rest);
        (left, right)
    } else {
        (types_area, rest)
    };
    render_types(app, ws, types_area, buf);
    if app.working_set_by_set() {
        render_sets(ws, &t.name, detail_area, buf);
    } else {
        render_detail(ws, t, wide, detail_area, buf);
    }
}

/// Per level, its sets at the level's peak, conflicted first: each set's types with their
/// objects and the functions that allocated them, `selected` highlighted; as many sets as the
/// level's share of `area` holds.
fn render_sets(ws: &WorkingSetReport, selected: &str, area: Rect, buf: &mut Buffer) {
    let [title, area] = Layout::vertical([Constraint::Length(2), Constraint::Fill(1)]).areas(area);
    Paragraph::new(vec![
        Line::from(vec![
            Span::styled("Sets by the types in them", HEADING),
            Span::styled(" at each level's peak (b: the type)", DIM),
        ]),
        Line::styled(
            "⚑ before a set: conflicted; after a type: its own histogram flags the set",
            DIM,
        ),
    ])
    .render(title, buf);
    if ws.by_set.is_empty() {
        Paragraph::new(Line::styled("no sets without cache geometry", DIM)).render(area, buf);
        return;
    }
    let levels = Layout::vertical(vec![Constraint::Fill(1); ws.by_set.len()]).split(area);
    for (level, &level_area) in ws.by_set.iter().zip(levels.iter()) {
        render_level_sets(level, selected, level_area, buf);
    }
}

fn render_level_sets(level: &LevelSets, selected: &str, area: Rect, buf: &mut Buffer) {
    let mut lines = vec![Line::from(vec![
        Span::styled(level.level.clone(), ACCENT),
        Span::styled(
            format!(
                " {} lines in {} of {} sets, {}-way, mean {:.3}; {} ⚑",
                level.lines,
                level.occupied_sets,
                level.sets,
                level.ways,
                level.mean_lines_per_set,
                level.conflicted_sets
            ),
            DIM,
        ),
    ])];
    // Below the heading: the sets, and a row for those that do not fit or were not listed.
    let rows = usize::from(area.height).saturating_sub(1);
    let listed = level.occupied.len();
    let shown = if level.sets_left_out > 0 || listed > rows {
        rows.saturating_sub(1).min(listed)
    } else {
        listed
    };
    lines.extend(
        level
            .occupied
            .iter()
            .take(shown)
            .map(|set| set_line(set, selected)),
    );
    let left_out = (listed - shown) as u64 + level.sets_left_out;
    if left_out > 0 {
        lines.push(Line::styled(
            format!("… {left_out} more sets (dprof report --view working-set --by-set)"),
            DIM,
        ));
    }
    Paragraph::new(lines).render(area, buf);
}

/// `⚑   0  4 lines  ss_page 2 (ss_page_alloc 2) · ss_skb 2 (ss_send_ack 1, ss_send_fin 1)`.
fn set_line(set: &SetOccupants, selected: &str) -> Line<'static> {
    let mut spans = vec![
        if set.conflicted {
            Span::styled("⚑ ", WARN)
        } else {
            Span::raw("  ")
        },
        Span::raw(format!(
            "{:>5} {:>3} {}  ",
            set.set,
            set.lines,
            if set.lines == 1 { "line " } else { "lines" }
        )),
    ];
    for (i, t) in set.types.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", DIM));
        }
        let style = if t.name == selected {
            ACCENT.patch(HEADING)
        } else {
            HEADING
        };
        spans.push(Span::styled(t.name.clone(), style));
        spans.push(Span::raw(format!(" {}", t.objects)));
        if t.flagged {
            spans.push(Span::styled(" ⚑", WARN));
        }
        let sites: Vec<String> = t
            .sites
            .iter()
            .map(|s| format!("{} {}", s.function, s.objects))
            .collect();
        spans.push(Span::styled(format!(" ({})", sites.join(", ")), DIM));
    }
    Line::from(spans)
}

fn render_types(app: &App, ws: &WorkingSetReport, area: Rect, buf: &mut Buffer) {
    let rows = ws
        .types
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.peak_objects.to_string(),
                bytes(t.peak_bytes),
                format!("{:.1}", t.mean_objects),
            ]
        })
        .collect();
    type_table(
        &[
            ("type", false),
            ("peak", true),
            ("bytes", true),
            ("mean", true),
        ],
        rows,
        app.working_set().list(),
        area,
        buf,
    );
}

/// `0.005 ms` after the series' first time.
fn since_start(ws: &WorkingSetReport, t: u64) -> String {
    let start = ws.times_ns.first().copied().unwrap_or(0);
    format!("{:.3} ms", t.saturating_sub(start) as f64 / 1e6)
}

fn render_detail(
    ws: &WorkingSetReport,
    t: &TypeWorkingSet,
    wide: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let width = usize::from(area.width);
    let summary = summary_lines(ws, t);
    let spark_height: u16 = if wide { 6 } else { 3 };
    let histogram_rows = t
        .histograms
        .iter()
        .map(|h| h.lines_per_set.len())
        .max()
        .unwrap_or(0) as u16;
    // Title, bars, flagged sets (two lines).
    let histogram_height = if t.histograms.is_empty() {
        2
    } else {
        histogram_rows + 4
    };
    let [summary_area, live_area, histogram_area, rest] = Layout::vertical([
        Constraint::Length(summary.len() as u16),
        Constraint::Length(spark_height + 2),
        Constraint::Length(histogram_height + 1),
        Constraint::Fill(1),
    ])
    .areas(area);
    Paragraph::new(summary).render(summary_area, buf);
    render_live(ws, t, live_area, buf);
    render_histograms(ws, t, histogram_area, buf);
    let mut lines = vec![Line::raw("")];
    let sim = &ws.simulation;
    if !ws.geometry.is_empty() {
        lines.push(Line::styled(
            format!(
                "simulation: {} objects of {} ({} following path traces), {} accesses",
                sim.objects, sim.eligible_objects, sim.objects_from_paths, sim.accesses
            ),
            DIM,
        ));
        lines.push(Line::raw(""));
    }
    lines.extend(note_lines(&ws.notes, width));
    render_lines(lines, rest, buf);
}

/// Peak and mean, and the lines each level holds.
fn summary_lines(ws: &WorkingSetReport, t: &TypeWorkingSet) -> Vec<Line<'static>> {
    let mut summary = vec![
        Line::raw(""),
        Line::from(vec![
            Span::styled(
                format!("peak {} objects ({})", t.peak_objects, bytes(t.peak_bytes)),
                HEADING,
            ),
            Span::raw(format!(
                " at {}, mean {:.1} objects ({})",
                since_start(ws, t.peak_time_ns),
                t.mean_objects,
                bytes(t.mean_bytes.round() as u64)
            )),
        ]),
    ];
    let resident = if t.resident_lines.is_empty() {
        Line::styled(
            if ws.geometry.is_empty() {
                "lines held: no simulation without cache geometry"
            } else {
                "lines held: not simulated (no sample or history touched the type)"
            },
            DIM,
        )
    } else {
        let parts: Vec<String> = t
            .resident_lines
            .iter()
            .map(|r| format!("{} {:.1}", r.level, r.mean_lines))
            .collect();
        Line::raw(format!(
            "lines held (simulated, mean): {}",
            parts.join(" · ")
        ))
    };
    summary.push(resident);
    summary
}

/// Live objects over time: a title, the sparkline, the time axis.
fn render_live(ws: &WorkingSetReport, t: &TypeWorkingSet, area: Rect, buf: &mut Buffer) {
    let [spark_title, spark_area, axis_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let span = ws
        .times_ns
        .last()
        .map_or_else(|| "0.000 ms".to_owned(), |&last| since_start(ws, last));
    let max = t.live_objects.iter().copied().max().unwrap_or(0);
    Paragraph::new(Line::from(vec![
        Span::styled("Live objects", HEADING),
        Span::styled(
            format!(" over {span} ({} points, max {max})", t.live_objects.len()),
            DIM,
        ),
    ]))
    .render(spark_title, buf);
    let points = resample_max(&t.live_objects, usize::from(spark_area.width));
    Sparkline::default()
        .data(&points)
        .max(max.max(1))
        .style(ACCENT)
        .render(spark_area, buf);
    let end = format!("{span} ");
    let axis = format!(
        "0{:>w$}",
        end.trim_end(),
        w = usize::from(axis_area.width).saturating_sub(1)
    );
    Paragraph::new(Line::styled(axis, DIM)).render(axis_area, buf);
}

/// `values` in at most `width` points, each the largest of the values it stands for (a peak
/// stays visible however narrow the chart).
fn resample_max(values: &[u64], width: usize) -> Vec<u64> {
    if values.is_empty() {
        return Vec::new();
    }
    // Fewer values than cells: each is repeated, so that the series spans the axis.
    (0..width)
        .map(|i| {
            let from = i * values.len() / width;
            let to = ((i + 1) * values.len() / width).max(from + 1);
            values[from..to].iter().copied().max().unwrap_or(0)
        })
        .collect()
}

/// One column per level: sets by the type's lines in them, conflicted buckets marked.
fn render_histograms(ws: &WorkingSetReport, t: &TypeWorkingSet, area: Rect, buf: &mut Buffer) {
    let [title, area] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    Paragraph::new(Line::from(vec![
        Span::styled("Sets by the type's lines in them", HEADING),
        Span::styled(" (at its peak; ⚑ conflicted)", DIM),
    ]))
    .render(title, buf);
    if t.histograms.is_empty() {
        let why = if ws.geometry.is_empty() {
            "no histograms without cache geometry"
        } else {
            "no histograms: no sample or history touched the type, so its lines are not known"
        };
        Paragraph::new(Line::styled(why, DIM)).render(area, buf);
        return;
    }
    let n = t.histograms.len() as u16;
    let shown = (area.width / MIN_HISTOGRAM_WIDTH).clamp(1, n);
    let columns = Layout::horizontal(vec![Constraint::Fill(1); usize::from(shown)])
        .spacing(2)
        .split(area);
    for (h, &column) in t.histograms.iter().zip(columns.iter()) {
        render_histogram(h, column, buf);
    }
}

fn render_histogram(h: &SetHistogram, area: Rect, buf: &mut Buffer) {
    let flagged_lines: u16 = if h.flagged_sets.is_empty() { 0 } else { 2 };
    let [title, chart, flagged] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(flagged_lines),
    ])
    .areas(area);
    Paragraph::new(Line::from(vec![
        Span::styled(h.level.clone(), ACCENT),
        Span::styled(
            format!(" {}-way, mean {:.3}", h.ways, h.mean_lines_per_set),
            DIM,
        ),
    ]))
    .render(title, buf);
    let label_width = h
        .lines_per_set
        .iter()
        .map(|b| b.lines.to_string().len())
        .max()
        .unwrap_or(1);
    let bars: Vec<Bar> = h
        .lines_per_set
        .iter()
        .map(|b| {
            let conflicted = h.conflicted(b.lines);
            let value = if conflicted {
                format!("{} sets ⚑", b.sets)
            } else {
                format!("{} sets", b.sets)
            };
            Bar::default()
                .label(Line::raw(format!("{:>label_width$}", b.lines)))
                .value(b.sets)
                .text_value(value)
                .style(if conflicted { WARN } else { ACCENT })
                .value_style(if conflicted {
                    WARN.patch(HEADING)
                } else {
                    HEADING
                })
        })
        .collect();
    // The chart needs room for its labels and at least a cell of bar.
    if usize::from(chart.width) > label_width + 2 {
        BarChart::default()
            .direction(Direction::Horizontal)
            .bar_width(1)
            .bar_gap(0)
            .data(BarGroup::default().bars(&bars))
            .render(chart, buf);
    }
    if !h.flagged_sets.is_empty() {
        let mut sets: Vec<String> = h
            .flagged_sets
            .iter()
            .take(SETS_SHOWN)
            .map(u64::to_string)
            .collect();
        if h.flagged_sets.len() > SETS_SHOWN {
            sets.push("…".to_owned());
        }
        let text = format!("⚑ {} sets: {}", h.flagged_sets.len(), sets.join(", "));
        let lines: Vec<Line> = wrap_at_most(&text, usize::from(flagged.width), 2)
            .into_iter()
            .map(|l| Line::styled(l, WARN))
            .collect();
        Paragraph::new(lines).render(flagged, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_keeps_the_peaks() {
        assert_eq!(resample_max(&[1, 5, 2, 0, 0, 3], 3), [5, 2, 3]);
        assert_eq!(resample_max(&[1, 2], 5), [1, 1, 1, 2, 2]);
        assert_eq!(resample_max(&[], 5), Vec::<u64>::new());
        assert_eq!(resample_max(&[0, 9, 0, 0, 0], 2), [9, 0]);
    }
}
