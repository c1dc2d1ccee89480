//! A view the report has no data for: what is missing, why, and where related data is.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Padding, Paragraph, Widget};

use super::style::{DIM, HEADING, WARN};
use super::wrap::wrap;
use crate::app::{Absence, App, View};

/// The view shown, which has no section in the report.
pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let view = app.view();
    let title = match app.selected_type() {
        Some(t) if view.is_per_type() => format!(" {} · {} ", view.title(), t.name),
        _ => format!(" {} ", view.title()),
    };
    let opened_at = match (view, app.data_flow_function()) {
        (View::DataFlow, Some(f)) => Some(format!(
            "opened at function {f}: with histories, its node would be selected here"
        )),
        _ => None,
    };
    match app.absence(view) {
        Some(absence) => render_absence(&absence, &title, opened_at.as_deref(), area, buf),
        // A view whose section the report has renders it (the data flow's own view).
        None => Block::bordered().title(title).render(area, buf),
    }
}

/// `absence` in a bordered block titled `title`, with a note under it.
pub(super) fn render_absence(
    absence: &Absence,
    title: &str,
    note: Option<&str>,
    area: Rect,
    buf: &mut Buffer,
) {
    let block = Block::bordered()
        .title(title.to_owned())
        .border_style(DIM)
        .padding(Padding::horizontal(1));
    let inner = block.inner(area);
    block.render(area, buf);
    let width = usize::from(inner.width);
    let mut lines = vec![
        Line::styled(absence.headline(), WARN.patch(HEADING)),
        Line::raw(""),
    ];
    lines.extend(wrap(&absence.why, width).into_iter().map(Line::from));
    if let Some(instead) = &absence.instead {
        lines.push(Line::raw(""));
        lines.extend(
            wrap(instead, width)
                .into_iter()
                .map(|l| Line::styled(l, DIM)),
        );
    }
    if let Some(note) = note {
        lines.push(Line::raw(""));
        lines.extend(wrap(note, width).into_iter().map(|l| Line::styled(l, DIM)));
    }
    Paragraph::new(lines).render(inner, buf);
}
