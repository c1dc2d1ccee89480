//! The causal ranking: for one progress point (←→ for the others), the types ranked by the
//! slope of program speedup against virtual speedup, with the 95% interval, the flags and the
//! data-profile rank; for the selected type, a chart of its experiments (program speedup
//! against virtual speedup) with the fitted line; then the experiments left out and what the
//! view could not see. A report that ranks no type says why at the top.

use dprof_model::causal::{Analysis, CausalReport, CausalUnit, DelayAccounting, Fit, TypeSlope};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph, Widget};

use super::absence;
use super::cache_views::{frame, note_lines, render_lines, type_table};
use super::style::{ACCENT, DIM, HEADING, WARN};
use super::wrap::{wrap, wrap_at_most};
use crate::app::App;

/// From this width the ranking sits left of the chart.
const WIDE: u16 = 120;
/// The lowest chart worth drawing.
const MIN_CHART_HEIGHT: u16 = 6;
/// The experiments' points.
const POINTS: Style = Style::new().fg(Color::Cyan);
/// The fitted line.
const FIT: Style = Style::new().fg(Color::Yellow);

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(causal) = app.report().and_then(|r| r.causal.as_ref()) else {
        absence::render(app, area, buf);
        return;
    };
    let state = app.causal();
    let Some(analysis) = state.shown(causal) else {
        let inner = frame(" Causal ", area, buf);
        let lines = wrap(
            "the causal session named no progress point, so no experiment measured anything",
            usize::from(inner.width),
        );
        Paragraph::new(lines.into_iter().map(Line::from).collect::<Vec<_>>()).render(inner, buf);
        return;
    };
    let count = causal.analyses.len();
    let title = if count > 1 {
        format!(
            " Causal · {} ({} of {count}, ←→) ",
            analysis.name,
            state.analysis() + 1
        )
    } else {
        format!(" Causal · {} ", analysis.name)
    };
    let inner = frame(&title, area, buf);
    let width = usize::from(inner.width);
    let mut top: Vec<Line> = wrap_at_most(&summary(causal, analysis), width, 2)
        .into_iter()
        .map(|l| Line::styled(l, DIM))
        .collect();
    if let Some(empty) = &causal.why_empty {
        top.extend(
            wrap_at_most(&format!("nothing to rank: {}", empty.message), width, 4)
                .into_iter()
                .map(|l| Line::styled(l, WARN)),
        );
    }
    let wide = inner.width >= WIDE;
    let rows = analysis.types.len() as u16 + 1;
    let [top_area, rest] =
        Layout::vertical([Constraint::Length(top.len() as u16), Constraint::Fill(1)]).areas(inner);
    Paragraph::new(top).render(top_area, buf);
    let selected = analysis.types.get(state.list().selected());
    if wide {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
                .spacing(2)
                .areas(rest);
        let [table_area, notes_area] = Layout::vertical([
            Constraint::Length(rows.min(left.height)),
            Constraint::Fill(1),
        ])
        .areas(left);
        render_ranking(app, causal, analysis, table_area, buf);
        render_notes(causal, notes_area, buf);
        render_selected(causal, analysis, selected, right, buf);
    } else {
        let table_height = rows.min(rest.height / 3).max(2);
        // The chart and its lines first; the notes get what is left, a few lines at most.
        let detail_height = MIN_CHART_HEIGHT + 4;
        let notes_height = rest
            .height
            .saturating_sub(table_height + detail_height)
            .min(4);
        let [table_area, detail_area, notes_area] = Layout::vertical([
            Constraint::Length(table_height),
            Constraint::Fill(1),
            Constraint::Length(notes_height),
        ])
        .areas(rest);
        render_ranking(app, causal, analysis, table_area, buf);
        render_selected(causal, analysis, selected, detail_area, buf);
        render_notes(causal, notes_area, buf);
    }
}

/// `34 experiments, 31 usable · slope: program speedup per unit of virtual speedup of the
/// type's accesses (least squares, 95% interval)`.
fn summary(causal: &CausalReport, analysis: &Analysis) -> String {
    let all = causal.experiments.len();
    let measure = match analysis.target {
        dprof_model::causal::Target::Throughput { .. } if causal.end_to_end_runs.is_some() => {
            "end-to-end: runs per effective second, one experiment per run"
        }
        dprof_model::causal::Target::Throughput { .. } => "throughput",
        dprof_model::causal::Target::Latency { .. } => "latency (Little's law)",
    };
    let sped_up = match causal.unit() {
        Some(CausalUnit::Type) => "the type's accesses".to_owned(),
        _ => format!("the {}'s instructions", causal.unit_word()),
    };
    let sampled = analysis
        .sampled_note()
        .map_or_else(String::new, |note| format!(" · {note}"));
    let method = causal.fixed_speedup_percent.map_or_else(
        || "least squares".to_owned(),
        |percent| format!("mean at the fixed {percent}% over {percent}%"),
    );
    let delays = match causal.delay_accounting {
        DelayAccounting::Task => "per task",
        DelayAccounting::Cpu => "per CPU, idle CPUs credited",
    };
    let load = causal
        .amplification()
        .map_or_else(String::new, |[_, pooled, _]| {
            format!(" · load amplified {pooled:.2}x")
        });
    let behind = causal.fell_behind.map_or_else(String::new, |b| {
        format!(
            " · tasks fell behind their delays in {} experiments, so those read low",
            b.experiments
        )
    });
    let callers = if causal.callers_in_scope.is_empty() {
        ""
    } else {
        " · samples outside the scope counted for their callers in it"
    };
    format!(
        "{all} experiments, {} usable · {measure} · slope: program speedup per unit of \
         virtual speedup of {sped_up} ({method}, 95% interval) · delays \
         {delays}{load}{behind}{callers}{sampled}",
        all - causal.discarded_experiments()
    )
}

fn flag(t: &TypeSlope) -> &'static str {
    match &t.fit {
        Fit::Slope(s) if s.hurts => "hurts",
        Fit::Slope(s) if s.within_noise => "noise",
        Fit::Slope(_) => "helps",
        Fit::NoSlope { .. } => "no slope",
    }
}

fn rank(r: Option<usize>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| r.to_string())
}

fn render_ranking(
    app: &App,
    causal: &CausalReport,
    analysis: &Analysis,
    area: Rect,
    buf: &mut Buffer,
) {
    let rows = analysis
        .types
        .iter()
        .map(|t| {
            let (slope, interval) = match t.fit.slope() {
                Some(s) => (
                    format!("{:+.3}", s.slope),
                    format!("[{:+.3}, {:+.3}]", s.low, s.high),
                ),
                None => ("-".to_owned(), "-".to_owned()),
            };
            vec![
                causal.label_of(t.type_index),
                rank(t.rank),
                slope,
                interval,
                flag(t).to_owned(),
                rank(t.data_profile_rank),
            ]
        })
        .collect();
    type_table(
        &[
            (causal.unit_word(), false),
            ("rank", true),
            ("slope", true),
            ("95% interval", false),
            ("flag", false),
            // The rank by samples: the data profile's, or the code's.
            (
                match causal.unit() {
                    Some(CausalUnit::Type) => "data",
                    _ => "sampled",
                },
                true,
            ),
        ],
        rows,
        app.causal().list(),
        area,
        buf,
    );
}

/// The selected type's chart and the line that explains it.
fn render_selected(
    causal: &CausalReport,
    analysis: &Analysis,
    t: Option<&TypeSlope>,
    area: Rect,
    buf: &mut Buffer,
) {
    let Some(t) = t else {
        return;
    };
    let width = usize::from(area.width);
    let mut lines = vec![Line::raw("")];
    lines.extend(
        wrap_at_most(&verdict(causal, analysis, t), width, 2)
            .into_iter()
            .map(|l| Line::styled(l, HEADING)),
    );
    lines.push(Line::from(vec![
        Span::styled("• ", POINTS),
        Span::styled("experiments   ", DIM),
        Span::styled("— ", FIT),
        Span::styled("fitted line", DIM),
    ]));
    let [text_area, chart_area] =
        Layout::vertical([Constraint::Length(lines.len() as u16), Constraint::Fill(1)]).areas(area);
    Paragraph::new(lines).render(text_area, buf);
    if t.experiment_points.is_empty() {
        let why = match t.fit {
            Fit::NoSlope {
                reason,
                distinct_speedups,
            } => reason.describe(distinct_speedups),
            Fit::Slope(_) => String::new(),
        };
        let text = format!("nothing to plot: {why}");
        Paragraph::new(
            wrap(&text, width)
                .into_iter()
                .map(|l| Line::styled(l, WARN))
                .collect::<Vec<_>>(),
        )
        .render(chart_area, buf);
        return;
    }
    if chart_area.height >= MIN_CHART_HEIGHT {
        render_chart(t, chart_area, buf);
    }
}

/// `skbuff_head_cache: slope +0.487 [+0.474, +0.500], rank 1 · data rank 2 · 10 experiments
/// (5 at 0%) at 6 speedups · baseline 200442 visits/s`.
fn verdict(causal: &CausalReport, analysis: &Analysis, t: &TypeSlope) -> String {
    let fit = match &t.fit {
        Fit::Slope(s) => format!(
            "slope {:+.3} [{:+.3}, {:+.3}], rank {}",
            s.slope,
            s.low,
            s.high,
            rank(t.rank)
        ),
        Fit::NoSlope {
            reason,
            distinct_speedups,
        } => format!("no slope: {}", reason.describe(*distinct_speedups)),
    };
    let baseline = t.baseline.map_or_else(String::new, |b| {
        format!(" · baseline {}", analysis.target.format(b))
    });
    format!(
        "{}: {fit} · {} {} · {} experiments ({} at 0%) at {} speedups{baseline}",
        causal.label_of(t.type_index),
        match causal.unit() {
            Some(CausalUnit::Type) => "data rank",
            _ => "sample rank",
        },
        rank(t.data_profile_rank),
        t.experiments,
        t.baseline_experiments,
        t.speedups.len()
    )
}

/// Program speedup (percent) against virtual speedup (percent): each experiment a point,
/// the fitted line across.
fn render_chart(t: &TypeSlope, area: Rect, buf: &mut Buffer) {
    let points: Vec<(f64, f64)> = t
        .experiment_points
        .iter()
        .map(|p| (f64::from(p.speedup_percent), p.program_speedup * 100.0))
        .collect();
    let line: Vec<(f64, f64)> = t.fit.slope().map_or_else(Vec::new, |s| {
        vec![
            (0.0, s.intercept * 100.0),
            (100.0, (s.intercept + s.slope) * 100.0),
        ]
    });
    let (mut low, mut high) = points
        .iter()
        .chain(&line)
        .fold((0.0_f64, 0.0_f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    // Some room around the points, and at least +-1% so that noise does not fill the chart.
    let pad = ((high - low) * 0.1).max(1.0);
    low -= pad;
    high += pad;
    let mut datasets = vec![Dataset::default()
        .marker(Marker::Dot)
        .graph_type(GraphType::Scatter)
        .style(POINTS)
        .data(&points)];
    if !line.is_empty() {
        datasets.push(
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(FIT)
                .data(&line),
        );
    }
    let x_axis = Axis::default()
        .title(Span::styled("virtual speedup", DIM))
        .style(DIM)
        .bounds([0.0, 100.0])
        .labels(["0%", "50%", "100%"]);
    let y_axis = Axis::default()
        .title(Span::styled("program", DIM))
        .style(DIM)
        .bounds([low, high])
        .labels([
            format!("{low:+.0}%"),
            format!("{:+.0}%", f64::midpoint(low, high)),
            format!("{high:+.0}%"),
        ]);
    Chart::new(datasets)
        .x_axis(x_axis)
        .y_axis(y_axis)
        .legend_position(None)
        .render(area, buf);
}

/// The experiments left out, by reason, and what the view could not see.
fn render_notes(causal: &CausalReport, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let width = usize::from(area.width);
    let mut lines = vec![Line::raw("")];
    let groups = causal.discard_groups();
    if groups.is_empty() {
        lines.push(Line::styled("discarded experiments: none", DIM));
    } else {
        let parts: Vec<String> = groups
            .iter()
            .map(|g| format!("{} {}", g.reason.describe(), g.experiments.len()))
            .collect();
        let text = format!("discarded experiments: {}", parts.join(" · "));
        lines.extend(
            wrap(&text, width)
                .into_iter()
                .map(|l| Line::styled(l, ACCENT)),
        );
    }
    if !causal.unseen.is_empty() {
        lines.push(Line::raw(""));
        lines.extend(note_lines(&causal.unseen, width));
    }
    render_lines(lines, area, buf);
}
