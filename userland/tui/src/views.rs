//! The views: pure renderings of [`App`] (`impl Widget for &App`); they read the state and
//! never change it.

mod absence;
mod cache_views;
mod causal;
mod data_flow;
mod data_profile;
mod heat_strip;
mod help;
mod history_steps;
mod loading;
mod misses;
mod style;
mod type_detail;
mod whole_object;
mod working_set;
mod wrap;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs, Widget};

use crate::app::{App, FlowSubject, Pane, View};
use style::{ACCENT, DIM};
use wrap::wrap;

/// The smallest terminal the browser draws in; smaller ones get a message.
pub const MIN_WIDTH: u16 = 50;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 12;

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            too_small(area, buf);
            return;
        }
        let [tabs, body, status] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Fill(1),
            Constraint::Length(1),
        ])
        .areas(area);
        match self.report() {
            None => loading::render(self, tabs, body, buf),
            Some(report) => {
                tab_bar(self.view(), tabs, buf);
                match self.view() {
                    View::DataProfile => data_profile::render(self, report, body, buf),
                    View::TypeDetail => type_detail::render(self, report, body, buf),
                    View::DataFlow => data_flow::render(self, body, buf),
                    View::MissClassification => misses::render(self, body, buf),
                    View::WorkingSet => working_set::render(self, body, buf),
                    View::Causal => causal::render(self, body, buf),
                }
            }
        }
        status_bar(self, status, buf);
        if self.help_open() {
            help::render(area, buf);
        }
    }
}

/// What a terminal below [`MIN_WIDTH`] x [`MIN_HEIGHT`] shows.
fn too_small(area: Rect, buf: &mut Buffer) {
    let text = format!(
        "terminal too small: {}x{}, dprof tui needs {MIN_WIDTH}x{MIN_HEIGHT} (q quits)",
        area.width, area.height
    );
    let lines: Vec<Line> = wrap(&text, usize::from(area.width))
        .into_iter()
        .map(Line::from)
        .collect();
    Paragraph::new(lines).render(area, buf);
}

/// The views as tabs, the one shown highlighted.
fn tab_bar(view: View, area: Rect, buf: &mut Buffer) {
    let titles = View::ALL
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{} {}", i + 1, v.title()));
    Tabs::new(titles)
        .select(view.index())
        .highlight_style(ACCENT.add_modifier(Modifier::BOLD | Modifier::REVERSED))
        .divider("│")
        .render(area, buf);
}

/// The last line: the keys that matter here (or the filter being typed), and what is
/// browsed, in what room the keys leave.
fn status_bar(app: &App, area: Rect, buf: &mut Buffer) {
    let filter = app.data_profile();
    let line = if app.report().is_some() && app.view() == View::DataProfile && filter.is_editing() {
        Line::from(vec![
            Span::styled("/", ACCENT),
            Span::raw(filter.filter().to_owned()),
            Span::styled("▏", ACCENT),
            Span::styled("  Enter keeps · Esc clears", DIM),
        ])
    } else {
        let keys = status_keys(app);
        let mut spans = Vec::new();
        for (i, (key, what)) in keys.iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(" · ", DIM));
            }
            spans.push(Span::styled(*key, ACCENT));
            spans.push(Span::raw(format!(" {what}")));
        }
        Line::from(spans)
    };
    let [left, right] =
        Layout::horizontal([Constraint::Length(line.width() as u16), Constraint::Fill(1)])
            .areas(area);
    Paragraph::new(line).render(left, buf);
    // A long path keeps its end: the file's name.
    let room = usize::from(right.width).saturating_sub(1);
    let source = app.source();
    let chars = source.chars().count();
    let name = if chars <= room {
        source.to_owned()
    } else {
        let tail: String = source.chars().skip(chars + 1 - room.max(1)).collect();
        format!("…{tail}")
    };
    Paragraph::new(Line::styled(name, DIM).right_aligned()).render(right, buf);
}

/// The keys that matter in the view shown, for the status bar.
fn status_keys(app: &App) -> &'static [(&'static str, &'static str)] {
    match (app.report(), app.view()) {
        (None, _) => &[("q", "quit"), ("?", "help")],
        (Some(_), View::DataProfile) => &[
            ("↑↓", "move"),
            ("Enter", "open"),
            ("/", "filter"),
            ("s", "sort"),
            ("Tab", "view"),
            ("?", "help"),
            ("q", "quit"),
        ],
        // Enter opens the data flow from a function only.
        (Some(_), View::TypeDetail) if app.type_detail().pane() == Pane::Functions => &[
            ("↑↓", "move"),
            ("←→", "pane"),
            ("Enter", "data flow"),
            ("s", "sort"),
            ("Esc", "back"),
            ("?", "help"),
        ],
        (Some(_), View::TypeDetail) => &[
            ("↑↓", "move"),
            ("←→", "pane"),
            ("s", "sort"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
        (Some(_), View::DataFlow)
            if app
                .data_flow_subject()
                .and_then(FlowSubject::histories)
                .is_some() =>
        {
            &[
                ("↑↓", "node"),
                ("Enter", "accesses"),
                ("Tab", "view"),
                ("Esc", "back"),
                ("?", "help"),
                ("q", "quit"),
            ]
        }
        (Some(_), View::WorkingSet)
            if app.view_type(View::WorkingSet).is_some() && app.working_set_by_set() =>
        {
            &[
                ("↑↓", "type"),
                ("Enter", "open"),
                ("b", "type"),
                ("Tab", "view"),
                ("?", "help"),
                ("q", "quit"),
            ]
        }
        (Some(_), View::WorkingSet) if app.view_type(View::WorkingSet).is_some() => &[
            ("↑↓", "type"),
            ("Enter", "open"),
            ("b", "sets"),
            ("Tab", "view"),
            ("?", "help"),
            ("q", "quit"),
        ],
        (Some(_), View::MissClassification)
            if app.view_type(View::MissClassification).is_some() =>
        {
            &[
                ("↑↓", "type"),
                ("Enter", "open"),
                ("Tab", "view"),
                ("Esc", "back"),
                ("?", "help"),
                ("q", "quit"),
            ]
        }
        (Some(report), View::Causal) if report.causal.is_some() => &[
            ("↑↓", "type"),
            ("←→", "point"),
            ("Enter", "open"),
            ("Tab", "view"),
            ("Esc", "back"),
            ("?", "help"),
        ],
        (Some(_), _) => &[
            ("Tab", "view"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
    }
}
