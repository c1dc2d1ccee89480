//! While the loader works: what it does, how far it is, what it warned about.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Gauge, Paragraph, Widget};

use super::style::{ACCENT, DIM, HEADING, WARN};
use super::wrap::wrap;
use crate::app::App;
use crate::format::grouped;

/// Widest the progress box gets.
const BOX_WIDTH: u16 = 72;

pub(super) fn render(app: &App, title_area: Rect, area: Rect, buf: &mut Buffer) {
    Paragraph::new(Line::from(vec![
        Span::styled("dprof tui", HEADING),
        Span::raw(format!(" · loading {}", app.source())),
    ]))
    .render(title_area, buf);
    let loading = app.loading();
    let stage = match (&loading.stage, loading.records) {
        (_, Some(_)) => "analyzing the records".to_owned(),
        (Some(stage), None) => stage.clone(),
        (None, None) => "opening".to_owned(),
    };
    let width = area.width.min(BOX_WIDTH);
    let warnings: Vec<Line> = app
        .warnings()
        .iter()
        .flat_map(|w| {
            wrap(
                &format!("warning: {w}"),
                usize::from(width.saturating_sub(2)),
            )
        })
        .map(|l| Line::styled(l, WARN))
        .collect();
    // Borders, the stage, the gauge, a blank line, the warnings.
    let height = (2 + 3 + warnings.len() as u16).min(area.height);
    let box_area = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 3,
        width,
        height,
    };
    let block = Block::bordered()
        .title(format!(" {} ", app.source()))
        .border_style(DIM);
    let inner = block.inner(box_area);
    block.render(box_area, buf);
    let [stage_area, gauge_area, _, warn_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    Paragraph::new(Line::styled(stage, ACCENT)).render(stage_area, buf);
    if let Some((done, total)) = loading.records {
        let ratio = if total == 0 {
            1.0
        } else {
            (done as f64 / total as f64).clamp(0.0, 1.0)
        };
        Gauge::default()
            .ratio(ratio)
            .label(format!(
                "{} of {} records ({:.0}%)",
                grouped(done),
                grouped(total),
                ratio * 100.0
            ))
            .gauge_style(ACCENT)
            .render(gauge_area, buf);
    }
    Paragraph::new(warnings).render(warn_area, buf);
}
