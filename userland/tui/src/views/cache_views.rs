//! What the miss classification and working-set views share: their frame, the cache geometry
//! line, the table of types, the "could not see" notes, and text that may not fit.

use dprof_model::cache::{CacheLevel, GeometrySource};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Text};
use ratatui::widgets::{
    Block, Cell, HighlightSpacing, Padding, Paragraph, Row, StatefulWidget, Table, TableState,
    Widget,
};

use super::style::{DIM, HEADING, SELECTED};
use super::wrap::wrap;
use crate::app::ListState;
use crate::format::bytes;

/// Columns between table columns.
const SPACING: u16 = 2;
/// The selected row's marker.
const MARKER: &str = "▶ ";

/// The view's border titled `title`; returns the room inside.
pub(super) fn frame(title: &str, area: Rect, buf: &mut Buffer) -> Rect {
    let block = Block::bordered()
        .title(title.to_owned())
        .border_style(DIM)
        .padding(Padding::horizontal(1));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// `caches (from the profile): L1d 64 KiB 2-way, 64-byte lines, 512 sets (per CPU); ...`,
/// each level marked with where it came from when `--cache` changed any; `short` leaves out
/// lines and sets.
pub(super) fn geometry_text(levels: &[CacheLevel], short: bool) -> String {
    if levels.is_empty() {
        return "no cache geometry: the profile lists no complete data cache; \
                dprof tui --cache L1d=SIZE/WAYS/LINE,... gives one"
            .to_owned();
    }
    let overridden = levels.iter().any(|l| l.source == GeometrySource::Override);
    let parts: Vec<String> = levels
        .iter()
        .map(|l| {
            let what = if short {
                format!("{} {}-way", bytes(l.size_bytes), l.ways)
            } else {
                l.describe()
            };
            format!("{} {what} ({})", l.name, l.sharing_and_source(overridden))
        })
        .collect();
    let from = if overridden {
        "caches (profile and --cache)"
    } else {
        "caches (from the profile)"
    };
    format!("{from}: {}", parts.join("; "))
}

/// A column of a type table: its header, and whether it holds numbers (right-aligned).
pub(super) type ColumnHead = (&'static str, bool);

/// The types of a view as a table, the first column their names (it takes the room the
/// others leave), the selected row marked and kept in sight.
pub(super) fn type_table(
    heads: &[ColumnHead],
    rows: Vec<Vec<String>>,
    list: &ListState,
    area: Rect,
    buf: &mut Buffer,
) {
    let widths: Vec<u16> = heads
        .iter()
        .enumerate()
        .map(|(col, (head, _))| {
            rows.iter()
                .map(|r| r.get(col).map_or(0, |c| c.chars().count()))
                .chain([head.chars().count()])
                .max()
                .unwrap_or(0) as u16
        })
        .collect();
    let cell = |col: usize, text: String| {
        let line = if heads.get(col).is_some_and(|h| h.1) {
            Line::from(text).right_aligned()
        } else {
            Line::from(text)
        };
        Cell::from(Text::from(line))
    };
    let header = Row::new(
        heads
            .iter()
            .enumerate()
            .map(|(col, (head, _))| cell(col, (*head).to_owned()).style(HEADING)),
    );
    let body = rows.into_iter().map(|row| {
        Row::new(
            row.into_iter()
                .enumerate()
                .map(|(col, text)| cell(col, text))
                .collect::<Vec<_>>(),
        )
    });
    let constraints = widths.iter().enumerate().map(|(col, &w)| {
        if col == 0 {
            Constraint::Fill(1)
        } else {
            Constraint::Length(w)
        }
    });
    let table = Table::new(body, constraints)
        .header(header)
        .column_spacing(SPACING)
        .row_highlight_style(SELECTED)
        .highlight_symbol(MARKER)
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::new()
        .with_offset(list.scroll())
        .with_selected(Some(list.selected()));
    StatefulWidget::render(table, area, buf, &mut state);
    list.set_scroll(state.offset());
}

/// The notes under "could not see", each wrapped to `width` after a dash.
pub(super) fn note_lines(notes: &[String], width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled("could not see:", HEADING)];
    for note in notes {
        for (i, l) in wrap(note, width.saturating_sub(2)).into_iter().enumerate() {
            let lead = if i == 0 { "- " } else { "  " };
            lines.push(Line::styled(format!("{lead}{l}"), DIM));
        }
    }
    lines
}

/// `lines` in `area`; when they do not all fit, the last row says how many are left out.
pub(super) fn render_lines(mut lines: Vec<Line<'static>>, area: Rect, buf: &mut Buffer) {
    let height = usize::from(area.height);
    if lines.len() > height && height > 0 {
        let left_out = lines.len() - (height - 1);
        lines.truncate(height - 1);
        lines.push(Line::styled(
            format!("… {left_out} more lines: a taller terminal shows them"),
            DIM,
        ));
    }
    Paragraph::new(lines).render(area, buf);
}
